"""Every exception the library raises on purpose, in one tree.

A name written ``module.Name`` lives in that module of the package (beside the code that
raises it, where moving it here would make ``errors`` import that code's types); the others
live here. Every one is exported from the package root.

```
ExternalQueryError
├── InputError                          bad input from a caller (file, JSON, TOML, date, flags)
│   ├── InvalidQuery                    a question or query_semantics that cannot be planned
│   ├── SettingsError                   settings that do not validate
│   │   └── UnknownAdapterKind          an [[adapters]] kind nobody registered
│   ├── admission.errors.EvidenceInputError
│   │                                   evidence-contract input that cannot be read (exit 2)
│   ├── integrations.common.IntegrationUnavailable
│   │                                   an integration's framework is not installed
│   ├── mcp_server.McpUnavailable       the optional mcp package is not installed
│   ├── TaskDefinitionError             a task script, toolkit, tool or parameter declared wrongly
│   ├── BrowserUnavailable              the browser extra or a Chromium executable is missing
│   └── server.ServerUnavailable        the optional server extra is not installed
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
├── server.errors.ApiError             an HTTP error answer of the server, with its reason
├── store.EvidenceEvicted              a stored text was evicted to keep the store bounded
├── admission.errors.ContractRejected   readable input the evidence contract refuses (exit 3)
├── storage.models.LedgerError          the ledger cannot be used (unavailable, busy, unmigrated)
│   └── storage.models.UnsoundLedger   a ledger that does not verify where one must
├── llm.client.LLMError                 the model endpoint gave no usable structured reply
│   └── llm.presenter.AnswerRejected    the model's draft answer failed a check in code
├── toolkit.errors.ToolkitError         a toolkit tool could not do what was asked
│   ├── toolkit.errors.BoundaryRefused  outside the caller's bounds (origin, link, path, file)
│   ├── toolkit.errors.BudgetExhausted  a page, byte or file budget of the task is used up
│   ├── toolkit.errors.UnsafePlatform   no O_NOFOLLOW / dir_fd opens here: fail closed
│   └── toolkit.errors.StaleState       a state_ref that is unknown, stale or already used
├── testing.recorder.NothingAnswered    no provider answered a recorded run; nothing written
└── testing.plugin.CaseFailed           a regression case's answer missed its expectations
```

A class that defines a ``reason`` (a class default or an ``__init__`` argument) sets it on
every instance as a machine-readable snake_case string, for audits, attempt records and
exit codes. The others (``InputError``, ``SettingsError``, ``TaskDefinitionError``,
``UnknownAdapterKind``, ``McpUnavailable``, ``BrowserUnavailable``, ``ServerUnavailable``,
``ServiceClosed``, ``EvidenceEvicted``, ``NothingAnswered``, ``CaseFailed``) are told apart
by their type and carry what they are about as attributes. Nothing returns ``None`` to mean
"it went wrong".
"""

from __future__ import annotations

__all__ = [
    "AdapterError",
    "BlockedDestination",
    "BrowserUnavailable",
    "ContentTooLarge",
    "ExternalQueryError",
    "ExtractionFailed",
    "FetchDeadlineExceeded",
    "FetchError",
    "InputError",
    "InvalidQuery",
    "NotRecorded",
    "RenderFailed",
    "ServiceClosed",
    "SettingsError",
    "TaskDefinitionError",
    "TooManyRedirects",
    "UnknownAdapterKind",
    "UnsafeURL",
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
    ``navigation_failed``, ``navigation_refused`` (the caller's origin rule), ``browser_error``
    (the browser itself failed), ``browser_closed``)."""

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
