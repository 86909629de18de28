"""One exception tree: every exception class of the package hangs under
``ExternalQueryError``, is drawn in ``errors.py``'s docstring under its real parent, and is
exported from the package root; ``reason`` is the one name of a failure's code."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable

import pytest

import external_query_service as eqs
from external_query_service import errors
from external_query_service.adapters._mcp_docs import _McpFailure
from external_query_service.errors import (
    INPUT_ERROR_REASONS,
    ApiError,
    BoundaryRefused,
    BudgetExhausted,
    ContractRejected,
    EvidenceInputError,
    ExternalQueryError,
    StaleState,
    ToolkitError,
    UnsafePlatform,
)
from external_query_service.llm._client import LLMError
from external_query_service.presenter._model import AnswerRejected
from external_query_service.storage import LedgerError
from external_query_service.storage._models import LedgerVerification, UnsoundLedger
from external_query_service.toolkit._delegate import _Refused
from tests.support.package_modules import package_modules
from tests.support.paths import REPO

OVERVIEW = REPO / "docs" / "architecture" / "overview.md"
_BRANCH = re.compile(r"^((?:│   |    )*)(?:├── |└── )(\S+)")
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


def _drawing(text: str) -> str:
    """The fenced block that starts with the root's name."""
    match = re.search(r"```\n(ExternalQueryError\n.*?)```", text, flags=re.DOTALL)
    assert match is not None, "no drawing of the tree"
    return match.group(1)


def _drawn() -> list[tuple[str, str | None]]:
    """Each drawn name with the name of its parent in the drawing (the root has none)."""
    lines = _drawing(errors.__doc__ or "").splitlines()
    assert lines[0] == "ExternalQueryError"
    pairs: list[tuple[str, str | None]] = [("ExternalQueryError", None)]
    parents = ["ExternalQueryError"]
    for line in lines[1:]:
        match = _BRANCH.match(line)
        if match is None:
            assert set(line[:4]) <= {"│", " "}, f"not a branch nor a continuation: {line!r}"
            continue
        depth = len(match.group(1)) // 4
        del parents[depth + 1 :]
        pairs.append((match.group(2), parents[depth]))
        parents.append(match.group(2))
    return pairs


def _resolve(drawn: str) -> type:
    """``Name`` lives in ``errors``; ``module.Name`` in that module of the package."""
    module, _, name = drawn.rpartition(".")
    where = importlib.import_module(f"{eqs.__name__}.{module or 'errors'}")
    value = getattr(where, name, None)
    assert isinstance(value, type), f"{drawn} is drawn but does not exist"
    assert value.__module__ == where.__name__, f"{drawn} is drawn where it does not live"
    return value


def _package_exceptions() -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for module in package_modules():
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found.add(value)
    return found


def _tree() -> set[type[ExternalQueryError]]:
    return {cls for cls in _package_exceptions() if issubclass(cls, ExternalQueryError)}


def test_the_walk_finds_exceptions_defined_outside_errors_py() -> None:
    assert {LedgerError, LLMError, ToolkitError, ContractRejected} <= _package_exceptions()


def test_every_exception_class_of_the_package_is_under_the_root() -> None:
    strays = {cls.__qualname__ for cls in _package_exceptions() - _tree()}
    assert strays == set()


@pytest.fixture
def every_module() -> None:
    """The drawing names classes of every module, the extras' too (a skip without them)."""
    package_modules()


@pytest.mark.usefixtures("every_module")
def test_the_drawing_names_only_classes_that_exist_under_their_real_parent() -> None:
    names = [name for name, _ in _drawn()]
    assert len(names) == len(set(names)), "a class is drawn twice"
    for name, parent in _drawn():
        cls = _resolve(name)
        assert issubclass(cls, ExternalQueryError), name
        if parent is not None:
            # Bases outside the tree (ImportError, for a missing optional framework) are not drawn.
            bases = tuple(base for base in cls.__bases__ if issubclass(base, ExternalQueryError))
            assert bases == (_resolve(parent),), f"{name} is not drawn under its parent"


@pytest.mark.usefixtures("every_module")
def test_every_public_exception_of_the_package_is_drawn() -> None:
    drawn = {_resolve(name) for name, _ in _drawn()}
    public = {cls for cls in _tree() if not cls.__name__.startswith("_")}
    missing = {cls.__qualname__ for cls in public - drawn}
    assert missing == set()


def test_every_public_exception_of_the_package_is_exported_from_the_root() -> None:
    for cls in _tree():
        if not cls.__name__.startswith("_"):
            assert cls.__name__ in eqs.__all__, cls.__name__
            assert getattr(eqs, cls.__name__) is cls


def test_the_tree_is_drawn_in_errors_py_alone_and_copied_into_the_overview() -> None:
    drawing = _drawing(errors.__doc__ or "")
    assert _drawing(OVERVIEW.read_text(encoding="utf-8")) == drawing
    others = [
        module.__name__
        for module in package_modules()
        if module is not errors and "├── " in (module.__doc__ or "")
    ]
    assert others == []


# --- reason -------------------------------------------------------------------------------


def _defines_reason(cls: type[ExternalQueryError]) -> bool:
    """A class default or an ``__init__`` argument named ``reason``, here or inherited."""
    for klass in cls.__mro__:
        if not issubclass(klass, ExternalQueryError):
            continue
        if "reason" in vars(klass) or "reason" in vars(klass).get("__annotations__", {}):
            return True
        init = vars(klass).get("__init__")
        if init is not None and "reason" in inspect.signature(init).parameters:
            return True
    return False


#: Classes whose type is their whole story: they carry no ``reason``.
WITHOUT_REASON = {
    "ExternalQueryError",
    "InputError",
    "SettingsError",
    "TaskDefinitionError",
    "UnknownAdapterKind",
    "McpUnavailable",
    "ServiceClosed",
    "NothingAnswered",
    "CaseFailed",
    "IntegrationUnavailable",
    "ServerUnavailable",
    "SemanticUnavailable",
    "BrowserUnavailable",
    "EvidenceEvicted",
    "_Stop",  # the delegation loop's private stop signal: its ``cause`` is a stop code
}

URL = "https://example.org/page"

#: One or more instances of every class that defines a reason, with the reason each carries.
SAMPLES: dict[str, list[tuple[Callable[[], ExternalQueryError], str]]] = {
    "InvalidQuery": [
        (lambda: errors.InvalidQuery("empty", reason="empty_question"), "empty_question")
    ],
    "_Refused": [(lambda: _Refused("not_offered", "web.open"), "not_offered")],
    "_McpFailure": [(lambda: _McpFailure("tool_error", "transient"), "tool_error")],
    "FetchError": [
        (lambda: errors.FetchError(URL), "fetch_failed"),
        (lambda: errors.FetchError(URL, "refused", reason="connect_failed"), "connect_failed"),
    ],
    "UnsafeURL": [(lambda: errors.UnsafeURL(URL), "unsafe_url")],
    "BlockedDestination": [(lambda: errors.BlockedDestination(URL), "blocked_destination")],
    "TooManyRedirects": [(lambda: errors.TooManyRedirects(URL), "too_many_redirects")],
    "ContentTooLarge": [(lambda: errors.ContentTooLarge(URL), "content_too_large")],
    "UnsupportedContent": [(lambda: errors.UnsupportedContent(URL), "unsupported_content")],
    "UpstreamStatus": [(lambda: errors.UpstreamStatus(URL, 503), "upstream_status")],
    "NotRecorded": [(lambda: errors.NotRecorded(URL, "GET /page"), "not_recorded")],
    "FetchDeadlineExceeded": [(lambda: errors.FetchDeadlineExceeded(URL), "deadline_exceeded")],
    "ExtractionFailed": [(lambda: errors.ExtractionFailed(URL, reason="no_text"), "no_text")],
    "AdapterError": [(lambda: errors.AdapterError("web", reason="bad_reply"), "bad_reply")],
    "RenderFailed": [(lambda: errors.RenderFailed(URL, reason="render_timeout"), "render_timeout")],
    "EvidenceInputError": [
        (lambda: EvidenceInputError("invalid_json", "bad", origin="x.json"), "invalid_json")
    ],
    "ContractRejected": [(lambda: ContractRejected("unknown_source", "s1"), "unknown_source")],
    "LedgerError": [(lambda: LedgerError("ledger_busy", "locked"), "ledger_busy")],
    "ApiError": [(lambda: ApiError(404, "unknown_ref", "unknown"), "unknown_ref")],
    "UnsoundLedger": [
        (
            lambda: UnsoundLedger(
                "ledger.sqlite3",
                LedgerVerification(ok=False, records=2, integrity="ok", first_bad_seq=2),
            ),
            "ledger_unsound",
        )
    ],
    "LLMError": [(lambda: LLMError("timeout"), "timeout")],
    "AnswerRejected": [(lambda: AnswerRejected("secret_in_reply", "no"), "secret_in_reply")],
    "ToolkitError": [
        (lambda: ToolkitError("no"), "tool_failed"),
        (lambda: ToolkitError("no", reason="not_found"), "not_found"),
    ],
    "BoundaryRefused": [(lambda: BoundaryRefused("no"), "boundary_refused")],
    "BudgetExhausted": [(lambda: BudgetExhausted("no"), "budget_exhausted")],
    "UnsafePlatform": [(lambda: UnsafePlatform("no"), "unsafe_platform")],
    "StaleState": [(lambda: StaleState("no"), "stale_state")],
}


def test_which_classes_carry_a_reason_is_pinned() -> None:
    without = {cls.__name__ for cls in _tree() if not _defines_reason(cls)}
    assert without == WITHOUT_REASON
    assert {cls.__name__ for cls in _tree() if _defines_reason(cls)} == set(SAMPLES)


@pytest.mark.parametrize(
    ("make", "reason"),
    [sample for samples in SAMPLES.values() for sample in samples],
    ids=[f"{name}-{index}" for name, samples in SAMPLES.items() for index in range(len(samples))],
)
def test_every_instance_of_a_class_that_defines_a_reason_carries_it_as_snake_case_text(
    make: Callable[[], ExternalQueryError], reason: str
) -> None:
    error = make()
    assert error.reason == reason  # type: ignore[attr-defined]
    assert isinstance(error.reason, str)  # type: ignore[attr-defined]
    assert _SNAKE.fullmatch(reason)


@pytest.mark.parametrize(
    "error",
    [
        errors.InputError("bad flag"),
        errors.SettingsError("bad key"),
        errors.UnknownAdapterKind("nope", ["searxng"]),
        errors.ServiceClosed(),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_class_without_a_reason_does_not_pretend_to_have_one(error: Exception) -> None:
    assert not hasattr(error, "reason")


def test_no_exception_of_the_package_names_its_code_code() -> None:
    assert not [cls.__name__ for cls in _tree() if "code" in vars(cls)]
    assert not hasattr(EvidenceInputError("invalid_json", "bad"), "code")


def test_an_evidence_input_reason_outside_the_documented_set_is_a_programming_error() -> None:
    assert "invalid_json" in INPUT_ERROR_REASONS
    with pytest.raises(ValueError, match="unknown input error reason 'typo'"):
        EvidenceInputError("typo", "bad")


def test_the_http_services_error_lives_in_errors_py_without_the_web_framework_as_a_base() -> None:
    assert ApiError.__module__ == errors.__name__
    bases = {cls.__module__ for cls in ApiError.__mro__} - {errors.__name__}
    assert bases == {"builtins"}  # Exception, BaseException, object: no starlette, no fastapi
    error = ApiError(503, "overloaded", "busy", headers={"Retry-After": "2"})
    assert (error.status_code, error.reason, error.detail, str(error)) == (
        503,
        "overloaded",
        "busy",
        "busy",
    )
