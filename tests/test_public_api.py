"""The public surface is exported on purpose; changing it is a decision, not an accident."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import external_query_service as eqs

EXPECTED = [
    "Adapter",
    "AdapterAttempt",
    "AdapterCapability",
    "AdapterError",
    "AdapterOutcome",
    "AdapterRuntime",
    "AdmissionSummary",
    "AnswerRejected",
    "ApiError",
    "AuditEvent",
    "AuditTrace",
    "BlockedDestination",
    "BoundaryRefused",
    "BrowserUnavailable",
    "BudgetExhausted",
    "CaseFailed",
    "Clock",
    "ContentTooLarge",
    "ContractRejected",
    "DisplaySource",
    "Evidence",
    "EvidenceEvicted",
    "EvidenceInputError",
    "EvidenceStore",
    "ExternalAnswer",
    "ExternalContextPacket",
    "ExternalQueryError",
    "ExternalQueryPlan",
    "ExternalQueryService",
    "ExtractionFailed",
    "FetchDeadlineExceeded",
    "FetchError",
    "InputError",
    "IntegrationUnavailable",
    "InvalidQuery",
    "LLMError",
    "LedgerError",
    "McpUnavailable",
    "NotRecorded",
    "NothingAnswered",
    "QuerySemantics",
    "RenderFailed",
    "SemanticUnavailable",
    "ServerUnavailable",
    "ServiceClosed",
    "Session",
    "Settings",
    "SettingsError",
    "StaleState",
    "TaskDefinitionError",
    "TimeRange",
    "TooManyRedirects",
    "ToolkitError",
    "UnknownAdapterKind",
    "UnsafePlatform",
    "UnsafeURL",
    "UnsoundLedger",
    "UnsupportedContent",
    "UpstreamStatus",
    "VerifierResult",
    "__version__",
    "fixed_clock",
    "register_adapter",
    "system_clock",
    "tune_collector",
    "verify_bundle",
]


def test_all_is_sorted_and_pinned() -> None:
    assert eqs.__all__ == sorted(eqs.__all__)
    assert eqs.__all__ == EXPECTED


@pytest.fixture
def every_export() -> None:
    """The root exports the HTTP service's names lazily: resolving them needs the server
    extra."""
    pytest.importorskip("fastapi")


@pytest.mark.usefixtures("every_export")
def test_every_exported_name_exists() -> None:
    missing = [name for name in eqs.__all__ if not hasattr(eqs, name)]
    assert missing == []


@pytest.mark.usefixtures("every_export")
def test_errors_share_one_root() -> None:
    for name in eqs.__all__:
        value = getattr(eqs, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, eqs.ExternalQueryError), name


def test_package_ships_type_information() -> None:
    from importlib.resources import files

    assert files("external_query_service").joinpath("py.typed").is_file()


def test_every_exported_name_is_listed_by_dir_and_an_unknown_one_is_an_attribute_error() -> None:
    assert set(eqs.__all__) <= set(dir(eqs))
    with pytest.raises(AttributeError, match="has no attribute 'Nonexistent'"):
        _ = eqs.Nonexistent  # type: ignore[attr-defined]


@pytest.mark.parametrize("package", ["external_query_service", "external_query_service.testing"])
def test_importing_a_package_loads_none_of_its_heavy_dependencies(package: str) -> None:
    script = (
        f"import json, sys; import {package}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('external_query_service')"
        " or m.split('.')[0] in ('trafilatura', 'lxml', 'jinja2', 'httpx', 'pydantic'))))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = json.loads(completed.stdout)
    assert set(loaded) <= {
        "external_query_service",
        "external_query_service._lazy",
        "external_query_service.testing",
    }


def test_each_public_name_is_written_once_in_the_package_root() -> None:
    """The ``TYPE_CHECKING`` imports are the list: no second table or ``__all__`` literal
    repeats a name as a string, and each name is imported by exactly one line."""
    import ast
    from collections import Counter

    tree = ast.parse(Path(eqs.__file__).read_text(encoding="utf-8"))
    strings = Counter(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    imported = Counter(
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname is not None
    )
    assert {name: strings[name] for name in EXPECTED if strings[name]} == {}
    assert {name: count for name, count in imported.items() if count != 1} == {}
    assert sorted(imported) == EXPECTED


def test_an_import_without_as_only_serves_annotations_and_is_not_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from external_query_service._lazy import declared_exports

    package = tmp_path / "declared_demo"
    package.mkdir()
    (package / "a.py").write_text("class Kept: ...\nclass Helper: ...\n", encoding="utf-8")
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from .a import Kept as Kept\n"
        "    from .a import Helper\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert declared_exports("declared_demo") == {"Kept": ".a"}
    finally:
        sys.modules.pop("declared_demo", None)
