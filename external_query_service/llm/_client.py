"""One client for the OpenAI-compatible ``POST /chat/completions`` protocol.

It speaks to OpenAI, Ollama, vLLM, llama.cpp's server and Qwen-compatible endpoints alike:
the request asks for structured output with ``response_format`` ``json_schema`` (a simple
schema: no ``$ref``, no formats); a server that answers 400 to that gets one retry with
``json_object`` and the schema written into the prompt, and the client keeps using that
mode once it has worked. Whatever the mode, the reply's content is parsed strictly and
validated against the pydantic model asked for: the model's word is never trusted.

The configured ``base_url`` is a trusted endpoint (like an adapter's own API): https, or
plain http to a loopback address. Its client is built like every other one in the package
(``net._backend.guarded_client``: one TLS context builder, no redirects, no proxies from the
environment, no cookies), trusting that origin alone. Bounded replies, a total deadline per
attempt, ``max_retries`` retries on transient failures, waiting what a ``Retry-After``
asks (either form, read against the injected clock) within a cap.

A caller may ask for log-probabilities (``top_logprobs`` alternatives per token) to weigh a
choice; a server that answers 400 to that request gets one retry without them, and the
client stops asking. Each ``Completion`` carries the token usage the server reported.

The API key is read from the environment variable named by ``api_key_env`` when a request
is sent, by an ``httpx.Auth`` hook: it is never stored on this object, never logged, and no
error message, exception chain or traceback frame of ours holds it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import ssl
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from .._clock import Clock, system_clock
from .._jsonio import loads_strict
from .._version import __version__
from ..errors import FetchError, InputError, LLMError, SettingsError
from ..net._backend import guarded_client, verifying_context
from ..net._policy import normalize_host
from ..net._retry_after import retry_after
from ..settings import LLMSettings, NetworkSettings, format_validation_error

__all__ = [
    "MAX_REPLY_BYTES",
    "ChatCompletionsClient",
    "ChatMessage",
    "Completion",
    "LLMError",
    "ResponseMode",
    "TokenLogprob",
    "TokenUsage",
    "json_schema_for",
]

logger = logging.getLogger("external_query_service.llm")

ResponseMode = Literal["json_schema", "json_object"]
M = TypeVar("M", bound=BaseModel)

#: Replies larger than this are refused: a plan or an answer is a few kilobytes.
MAX_REPLY_BYTES = 1024 * 1024
#: Longest server error message kept in an ``LLMError`` (after redaction).
_DETAIL_CHARS = 200
#: Backoff between retries: ``_BACKOFF_S * 2**n``, and never more than ``_MAX_WAIT_S``
#: (a hostile ``Retry-After`` is capped too).
_BACKOFF_S = 0.5
_MAX_WAIT_S = 8.0
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Reasoning models served through some endpoints put their thoughts before the answer.
_THINKING = re.compile(r"\A\s*<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"\A\s*```(?:json)?\s*\n(.*?)\n?```\s*\Z", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat completion request."""

    role: Literal["system", "user"]
    content: str


@dataclass(frozen=True)
class TokenUsage:
    """What the server said a reply cost, in tokens."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the alternatives the server listed
    (``top``: ``(token, logprob)`` pairs, the generated token usually among them)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Completion(Generic[M]):
    """A reply that parsed and validated as ``M``."""

    value: M
    #: The JSON text the model wrote (after removing a thinking block or code fence).
    content: str
    #: How structured output was requested for the attempt that succeeded.
    mode: ResponseMode
    #: The model name the server reported (``""`` when it named none).
    model: str
    #: Token usage as the server reported it (None when the reply had none).
    usage: TokenUsage | None = None
    #: The message's tokens with their log-probabilities, when asked for and returned;
    #: joined, their text is the whole message content (a thinking block included).
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class _Reply:
    content: str
    model: str
    usage: TokenUsage | None
    logprobs: tuple[TokenLogprob, ...] | None


# --- JSON schema --------------------------------------------------------------------------

_KEPT_KEYS = frozenset({"type", "enum", "description"})
_SCALARS = frozenset({"string", "number", "integer", "boolean"})
_FORMAT_HINTS = {"date": "YYYY-MM-DD", "date-time": "ISO 8601 date and time"}


def json_schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """A portable JSON schema for ``model``: ``$ref`` inlined, no ``format``, ``title``,
    ``default`` or length constraints; every object lists all its properties as required
    and forbids others (OpenAI's ``strict`` mode wants both). A nullable scalar is written
    ``{"type": [T, "null"]}``, the plain form OpenAI-compatible servers understand. Validation
    still happens in code; the schema only steers the model.
    """
    raw = model.model_json_schema(mode="validation")
    definitions = raw.get("$defs", {})
    return _simplify(raw, definitions, ())


def _simplify(
    node: Mapping[str, Any], definitions: Mapping[str, Any], seen: tuple[str, ...]
) -> dict[str, Any]:
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name in seen or name not in definitions:
            raise ValueError(f"cannot inline schema reference {node['$ref']!r}")
        inlined = _simplify(definitions[name], definitions, (*seen, name))
        if "description" in node:
            inlined["description"] = node["description"]
        return inlined
    out: dict[str, Any] = {key: node[key] for key in node if key in _KEPT_KEYS}
    if "const" in node:
        # A one-value Literal: written as an enum, which every server that takes a schema
        # reads (``const`` is newer and not universally understood).
        out["enum"] = [node["const"]]
    hint = _FORMAT_HINTS.get(str(node.get("format", "")))
    if hint and "description" not in out:
        out["description"] = hint
    if "items" in node:
        out["items"] = _simplify(node["items"], definitions, seen)
    if "properties" in node:
        properties = {
            name: _simplify(schema, definitions, seen)
            for name, schema in node["properties"].items()
        }
        out["properties"] = properties
        out["required"] = list(properties)
        out["additionalProperties"] = False
    if "anyOf" in node:
        branches = [_simplify(branch, definitions, seen) for branch in node["anyOf"]]
        out.update(_nullable(branches))
    return out


def _nullable(branches: list[dict[str, Any]]) -> dict[str, Any]:
    """``anyOf: [scalar, null]`` → ``type: [scalar, "null"]``; anything else stays anyOf."""
    others = [branch for branch in branches if branch != {"type": "null"}]
    if len(others) == 1 and len(branches) == 2 and others[0].get("type") in _SCALARS:
        merged = dict(others[0])
        merged["type"] = [merged["type"], "null"]
        if "enum" in merged:
            merged["enum"] = [*merged["enum"], None]
        return merged
    return {"anyOf": branches}


# --- the endpoint ---------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host.rstrip(".").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, checked: https, or http to a loopback address;
    no credentials, query or fragment. Anything else is a ``SettingsError``."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise SettingsError(f"[llm] base_url is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise SettingsError("[llm] base_url must be an http(s) URL with a host")
    if url.userinfo:
        raise SettingsError("[llm] base_url must not carry credentials; use api_key_env")
    if url.query or url.fragment:
        raise SettingsError("[llm] base_url must not have a query or fragment")
    if url.scheme == "http" and not _is_loopback(url.host):
        # The key and the question would cross the network in clear text.
        raise SettingsError("[llm] base_url must use https unless it is a loopback address")
    path = url.path.rstrip("/") + "/chat/completions"
    return str(url.copy_with(path=path))


class _EnvironmentBearer(httpx.Auth):
    """Adds ``Authorization: Bearer <key>`` with the key read from the environment as the
    request goes out, so the key lives only in the outgoing request."""

    def __init__(self, variable: str) -> None:
        self._variable = variable

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = "Bearer " + os.environ.get(self._variable, "")
        yield request


@dataclass(frozen=True)
class _Received:
    status: int
    body: bytes
    retry_after: str | None


def _redact(text: str, variable: str | None) -> str:
    key = os.environ.get(variable, "") if variable else ""
    return text.replace(key, "[redacted]") if key else text


def _error_detail(status: int, body: bytes, variable: str | None) -> str:
    if status in (401, 403):
        # Some servers echo (part of) the key they refused; say nothing of theirs.
        return f"HTTP {status}: the endpoint refused the credentials"
    message = ""
    try:
        data = json.loads(body.decode("utf-8"))
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass
    message = " ".join(_redact(message, variable).split())[:_DETAIL_CHARS]
    return f"HTTP {status}" + (f": {message}" if message else "")


def _wait_s(attempt: int, asked: float | None) -> float:
    """The pause before retry ``attempt + 1``: what the server asked (``Retry-After``),
    else exponential backoff; never more than ``_MAX_WAIT_S``."""
    wait = asked if asked is not None else _BACKOFF_S * float(2**attempt)
    return min(wait, _MAX_WAIT_S)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(data: Mapping[str, Any]) -> TokenUsage | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion)


def _logprob(item: Any) -> tuple[str, float] | None:
    if not isinstance(item, dict):
        return None
    token, value = item.get("token"), item.get("logprob")
    if not isinstance(token, str) or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return token, float(value)


def _token_logprobs(choice: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    """The ``logprobs.content`` list of a choice; None when absent or malformed (a reply
    is never refused for its log-probabilities: the caller only loses the figures)."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    tokens: list[TokenLogprob] = []
    for item in content:
        own = _logprob(item)
        alternatives = item.get("top_logprobs") if isinstance(item, dict) else None
        if own is None or not isinstance(alternatives, list):
            return None
        top = [_logprob(alternative) for alternative in alternatives]
        if any(entry is None for entry in top):
            return None
        tokens.append(
            TokenLogprob(token=own[0], logprob=own[1], top=tuple(e for e in top if e is not None))
        )
    return tuple(tokens)


def _message_content(data: Any) -> _Reply:
    """Content, model, usage and token log-probabilities of a chat completion;
    ``LLMError`` when it carries no content."""
    if not isinstance(data, dict):
        raise LLMError("invalid_response", "the reply is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError("invalid_response", "the reply has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise LLMError("invalid_response", "the first choice has no message")
    finish = choice.get("finish_reason")
    if finish == "length":
        raise LLMError("truncated", "the reply hit the token limit (finish_reason=length)")
    if finish == "content_filter":
        raise LLMError("refused", "the endpoint filtered the reply (finish_reason=content_filter)")
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        raise LLMError("refused", "the model refused: " + " ".join(refusal.split())[:100])
    if finish == "tool_calls":
        raise LLMError("invalid_response", "the model called a tool instead of answering")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise LLMError("empty_reply", "the message has no content")
    model = data.get("model")
    return _Reply(
        content=content,
        model=model if isinstance(model, str) else "",
        usage=_usage(data),
        logprobs=_token_logprobs(choice),
    )


def _json_text(content: str) -> str:
    text = _THINKING.sub("", content, count=1).strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


class ChatCompletionsClient:
    """Structured completions from one OpenAI-compatible endpoint.

    Build one per service from ``Settings.llm`` and hand it to the planner and the
    presenter. Safe to use from any event loop: each call opens and closes its own
    connection, so nothing is bound to a loop (an LLM call is rare next to its cost).
    ``sleep`` waits between retries (tests pass a no-op); ``clock`` is what a date in
    ``Retry-After`` is read against.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Clock = system_clock,
    ) -> None:
        self._settings = settings
        self._url = _chat_completions_url(settings.base_url)
        if settings.api_key_env is not None and not settings.api_key_env.strip():
            raise SettingsError("[llm] api_key_env is empty")
        self._mode: ResponseMode = "json_schema"
        self._logprobs_refused = False
        self._sleep = sleep
        self._clock = clock
        # The model endpoint's own settings: its timeout, no address rules of [network]
        # (its origin is trusted, as an adapter's API is), certifi's roots.
        self._network = NetworkSettings(timeout_s=settings.timeout_s)
        endpoint = httpx.URL(self._url)
        self._origin = (
            normalize_host(endpoint.host),
            endpoint.port or _DEFAULT_PORTS[endpoint.scheme],
        )
        self._ssl_context: ssl.SSLContext | None = None

    @property
    def model(self) -> str:
        """The model name every request names."""
        return self._settings.model

    @property
    def endpoint(self) -> str:
        """The chat completions URL requests go to."""
        return self._url

    @property
    def mode(self) -> ResponseMode:
        """How the next call asks for structured output."""
        return self._mode

    def credential_values(self) -> tuple[str, ...]:
        """The credential a request sent now carries, for callers that must keep it out of
        what they show: the API key, read from the ``api_key_env`` variable at this call
        (its ``Authorization`` value, ``Bearer <key>``, contains it). Empty without a key.

        Nothing is kept: call it where the comparison happens and let the result go.
        """
        variable = self._settings.api_key_env
        key = os.environ.get(variable, "").strip() if variable else ""
        return (key,) if key else ()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        output: type[M],
        *,
        name: str,
        schema: Mapping[str, Any] | None = None,
        top_logprobs: int | None = None,
    ) -> Completion[M]:
        """Ask for one JSON object that validates as ``output`` (strict JSON-mode
        validation: no type coercion). ``schema`` replaces the generated one (to add an
        enum, say); ``name`` labels it (``[A-Za-z0-9_-]``, at most 64 characters).
        ``top_logprobs`` (1–20) asks for token log-probabilities with that many
        alternatives; the reply may still come without them. Failures raise ``LLMError``.
        """
        if not _SCHEMA_NAME.fullmatch(name):
            raise InputError(f"schema name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
        if not messages:
            raise InputError("a chat completion needs at least one message")
        if top_logprobs is not None and not 1 <= top_logprobs <= 20:
            raise InputError(f"top_logprobs must be 1 to 20, not {top_logprobs}")
        wire_schema = dict(schema) if schema is not None else json_schema_for(output)
        mode = self._mode
        alternatives = None if self._logprobs_refused else top_logprobs
        while True:
            try:
                reply = await self._ask(messages, name, wire_schema, mode, alternatives)
                break
            except LLMError as exc:
                if exc.status != 400:
                    raise
                # A server that does not take logprobs may answer 400: ask again without
                # them (and stop asking), before giving up on json_schema.
                if alternatives is not None:
                    logger.info("llm endpoint refused logprobs (HTTP 400); retrying without")
                    alternatives = None
                    self._logprobs_refused = True
                    continue
                # A server that does not take json_schema answers 400; retry once in JSON
                # mode with the schema spelled out in the prompt.
                if mode != "json_schema":
                    raise
                logger.info("llm endpoint refused json_schema (HTTP 400); retrying in JSON mode")
                mode = "json_object"
        self._mode = mode
        content, model = reply.content, reply.model
        text = _json_text(content)
        try:
            loads_strict(text, origin="model reply")
        except InputError as exc:
            raise LLMError("invalid_json", str(exc)[:_DETAIL_CHARS]) from None
        try:
            value = output.model_validate_json(text, strict=True)
        except ValidationError as exc:
            detail = format_validation_error(exc)[:_DETAIL_CHARS]
            raise LLMError("schema_violation", detail) from None
        return Completion(
            value=value,
            content=text,
            mode=mode,
            model=model,
            usage=reply.usage,
            logprobs=reply.logprobs,
        )

    # -- one request, with retries ---------------------------------------------------------

    async def _ask(
        self,
        messages: Sequence[ChatMessage],
        name: str,
        schema: dict[str, Any],
        mode: ResponseMode,
        top_logprobs: int | None = None,
    ) -> _Reply:
        body = self._body(messages, name, schema, mode, top_logprobs)
        attempt = 0
        while True:
            failure, received = await self._post(body)
            if received is not None and not 200 <= received.status < 300:
                failure = LLMError(
                    "http_status",
                    _error_detail(received.status, received.body, self._settings.api_key_env),
                    status=received.status,
                )
            if failure is None and received is not None:
                try:
                    data = json.loads(received.body.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError):
                    raise LLMError("invalid_response", "the reply is not JSON") from None
                return _message_content(data)
            assert failure is not None
            if not failure.transient or attempt >= self._settings.max_retries:
                raise failure
            asked = retry_after(received.retry_after, self._clock) if received is not None else None
            wait = _wait_s(attempt, asked)
            logger.info("llm request failed (%s); retry %d in %.1f s", failure, attempt + 1, wait)
            attempt += 1
            await self._sleep(wait)

    def _body(
        self,
        messages: Sequence[ChatMessage],
        name: str,
        schema: dict[str, Any],
        mode: ResponseMode,
        top_logprobs: int | None = None,
    ) -> bytes:
        wire = [{"role": message.role, "content": message.content} for message in messages]
        response_format: dict[str, Any]
        if mode == "json_schema":
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": True, "schema": schema},
            }
        else:
            # JSON mode needs the word JSON in the prompt (OpenAI refuses the call without
            # it), and the schema is the only way left to say which object we want.
            spelled = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
            wire.insert(
                0,
                {
                    "role": "system",
                    "content": "Reply with exactly one JSON object, no other text. "
                    f"It must validate against this JSON schema: {spelled}",
                },
            )
            response_format = {"type": "json_object"}
        payload: dict[str, Any] = {
            "model": self._settings.model,
            "messages": wire,
            "temperature": self._settings.temperature,
            "stream": False,
            "response_format": response_format,
        }
        if top_logprobs is not None:
            payload.update(logprobs=True, top_logprobs=top_logprobs)
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")

    async def _post(self, body: bytes) -> tuple[LLMError | None, _Received | None]:
        """One HTTP exchange.

        Failures are returned, not raised: the caller raises them from a frame that holds
        neither the request (with its Authorization header) nor an httpx exception chain.
        """
        variable = self._settings.api_key_env
        if variable is not None and not os.environ.get(variable):
            return LLMError("missing_api_key", f"environment variable {variable} is not set"), None
        auth = _EnvironmentBearer(variable) if variable is not None else None
        timeout_s = self._settings.timeout_s
        failure: LLMError | None = None
        try:
            # httpx's timeouts apply per read; the deadline bounds the whole exchange.
            async with asyncio.timeout(timeout_s), self._client() as client:
                request = client.build_request("POST", self._url, content=body)
                response = await client.send(request, auth=auth, stream=True)
                try:
                    received = await self._read(response)
                finally:
                    await response.aclose()
            return (received, None) if isinstance(received, LLMError) else (None, received)
        except (TimeoutError, httpx.TimeoutException):
            failure = LLMError("timeout", f"no complete reply within {timeout_s:g} s")
        except (httpx.HTTPError, OSError) as exc:
            failure = LLMError("transport_error", type(exc).__name__)
        except FetchError as exc:  # the endpoint's host could not be resolved
            failure = LLMError("transport_error", f"{type(exc).__name__}: {exc.reason}")
        return failure, None

    async def _read(self, response: httpx.Response) -> _Received | LLMError:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # We asked for identity; a compressed reply could expand without bound.
            return LLMError("invalid_response", f"unexpected Content-Encoding {encoding!r}")
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
            return LLMError("response_too_large", f"Content-Length {declared}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                return LLMError("response_too_large", f"more than {MAX_REPLY_BYTES} bytes")
            chunks.append(chunk)
        return _Received(
            response.status_code, b"".join(chunks), response.headers.get("retry-after")
        )

    def _client(self) -> httpx.AsyncClient:
        """A client for one call (nothing bound to an event loop), trusting only the
        endpoint's origin; the TLS context is built once and reused."""
        if self._ssl_context is None:
            self._ssl_context = verifying_context(self._network)
        return guarded_client(
            self._network,
            headers={
                "Accept": "application/json",
                "Accept-Encoding": "identity",
                "Content-Type": "application/json",
                "User-Agent": f"external_query_service/{__version__}",
            },
            trusted_origins=[self._origin],
            max_connections=1,
            ssl_context=self._ssl_context,
        )
