"""LangChain's own standard suites (``langchain-tests``) against the retriever and the tool,
on the offline docs world: three documents are admitted, so ``k`` of 1 and 3 both hold.

Each suite builds its objects from ``settings=`` (the integration owns the service) and never
closes them: collection closes them, which these runs exercise too.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    ToolsIntegrationTests,
)
from langchain_tests.unit_tests import ToolsUnitTests

from external_query_service.integrations.langchain import (
    ExternalQueryRetriever,
    ExternalQueryTool,
)

from .support import DOCS_QUESTION, DOCS_SEMANTICS, docs_settings


class TestExternalQueryRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[ExternalQueryRetriever]:
        return ExternalQueryRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"settings": docs_settings(), "query_semantics": DOCS_SEMANTICS}

    @property
    def retriever_query_example(self) -> str:
        return DOCS_QUESTION


class _ToolOnDocs:
    @property
    def tool_constructor(self) -> type[ExternalQueryTool]:
        return ExternalQueryTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"settings": docs_settings()}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"question": DOCS_QUESTION, **DOCS_SEMANTICS}


class TestExternalQueryToolUnit(_ToolOnDocs, ToolsUnitTests):
    pass


class TestExternalQueryToolIntegration(_ToolOnDocs, ToolsIntegrationTests):
    pass
