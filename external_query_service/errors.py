"""Every exception the library raises on purpose.

```
ExternalQueryError
├── InputError                      bad input from a caller (file, JSON, TOML, date, flags)
│   ├── InvalidQuery                a question or query_semantics that cannot be planned
│   └── SettingsError               settings that do not validate
│       └── UnknownAdapterKind      an [[adapters]] kind nobody registered
├── FetchError                      a URL could not be fetched safely (carries url + reason)
│   ├── UnsafeURL                   scheme, port, userinfo or host refused before connecting
│   ├── BlockedDestination          the resolved address is outside the network policy
│   ├── TooManyRedirects
│   ├── ContentTooLarge             declared or received bytes (raw or decoded) over the cap
│   ├── UnsupportedContent          content type or encoding we do not read
│   ├── UpstreamStatus              the server answered with a non-success status
│   └── FetchDeadlineExceeded       the total deadline ran out
├── ExtractionFailed                no usable main text (carries url + reason)
├── AdapterError                    an adapter could not do its job (carries adapter id + reason)
└── ServiceClosed                   the service was used after close()
```

Failures always carry a machine-readable ``reason``; nothing returns ``None`` to
mean "it went wrong".
"""

from __future__ import annotations

__all__ = [
    "AdapterError",
    "BlockedDestination",
    "ContentTooLarge",
    "ExternalQueryError",
    "ExtractionFailed",
    "FetchDeadlineExceeded",
    "FetchError",
    "InputError",
    "InvalidQuery",
    "ServiceClosed",
    "SettingsError",
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


class SettingsError(InputError):
    """Settings failed validation (unknown key, bad type, bad CIDR, ...)."""


class UnknownAdapterKind(SettingsError):
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
    reason = "unsafe_url"


class BlockedDestination(FetchError):
    reason = "blocked_destination"


class TooManyRedirects(FetchError):
    reason = "too_many_redirects"


class ContentTooLarge(FetchError):
    reason = "content_too_large"


class UnsupportedContent(FetchError):
    reason = "unsupported_content"


class UpstreamStatus(FetchError):
    reason = "upstream_status"

    def __init__(self, url: str, status: int, detail: str = "") -> None:
        self.status = status
        super().__init__(url, detail or f"HTTP {status}")


class FetchDeadlineExceeded(FetchError):
    reason = "deadline_exceeded"


class ExtractionFailed(ExternalQueryError):
    def __init__(self, url: str, *, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"extraction failed for {url}: {reason}")


class AdapterError(ExternalQueryError):
    def __init__(self, adapter_id: str, *, reason: str, detail: str = "") -> None:
        self.adapter_id = adapter_id
        self.reason = reason
        self.detail = detail
        text = f"adapter {adapter_id!r}: {reason}"
        super().__init__(f"{text} ({detail})" if detail else text)


class ServiceClosed(ExternalQueryError):
    def __init__(self) -> None:
        super().__init__("the service is closed")
