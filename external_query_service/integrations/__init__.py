"""Drop-ins for hosts built on LangChain or LlamaIndex.

- ``integrations.langchain`` (extra ``[langchain]``): ``ExternalQueryRetriever``, a
  ``BaseRetriever`` over the admitted evidence, and ``ExternalQueryTool``, a ``BaseTool``
  that answers with the presenter's text and sources.
- ``integrations.llamaindex`` (extra ``[llamaindex]``): ``ExternalQueryRetriever``, a
  ``BaseRetriever`` of ``NodeWithScore``, and ``external_query_tool()``, a ``FunctionTool``.

Each takes ``service=`` (shared; the caller closes it) or ``settings=`` (owned; closed by the
integration's ``close()``, on collection or at exit). Importing this package loads neither
framework; importing one of the modules loads that framework, and a missing one raises
``IntegrationUnavailable`` (an ``InputError`` and an ``ImportError``) with the install command.
See docs/architecture/integrations.md.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._common import IntegrationUnavailable

__all__ = ["IntegrationUnavailable"]

__getattr__, __dir__ = lazy_exports(__name__, {"IntegrationUnavailable": "._common"})
