"""The chat completions client against a scripted loopback endpoint (no real model)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import traceback
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from external_query_service.errors import ExternalQueryError, InputError, SettingsError
from external_query_service.llm import (
    ChatCompletionsClient,
    ChatMessage,
    LLMError,
    json_schema_for,
)
from external_query_service.models import QuerySemantics
from external_query_service.settings import LLMSettings
from external_query_service.testing import Reply
from tests.support.llm_chat import (
    CHAT_PATH,
    ChatServer,
    answer_json,
    api_error,
    completion,
    logprob_tokens,
)

KEY_ENV = "EQS_TEST_LLM_KEY"
SECRET = "sk-test-6f1d2c9a8b7e4f30a1b2c3d4e5f60718"
ASK = (ChatMessage("system", "Reply with JSON."), ChatMessage("user", "湛江明天天气？"))


class Weather(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    city: str
    temp_c: int | None


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def ask(client: ChatCompletionsClient, output: type[BaseModel] = Weather) -> Any:
    return asyncio.run(client.complete(ASK, output, name="weather_extract"))


def failure(client: ChatCompletionsClient) -> LLMError:
    with pytest.raises(LLMError) as caught:
        ask(client)
    return caught.value


async def no_sleep(_seconds: float) -> None:
    return None


# --- the request ------------------------------------------------------------------------------


def test_request_asks_for_a_strict_json_schema_response_format(chat: ChatServer) -> None:
    chat.then(answer_json({"city": "湛江", "temp_c": 24}))
    result = ask(ChatCompletionsClient(chat.settings(temperature=0.2)))

    assert result.value == Weather(city="湛江", temp_c=24)
    assert result.mode == "json_schema"
    assert result.model == "fake-model-2026"
    body = chat.bodies[0]
    assert chat.requests_to(CHAT_PATH)[0].method == "POST"
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.2
    assert body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "Reply with JSON."},
        {"role": "user", "content": "湛江明天天气？"},
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "weather_extract",
            "strict": True,
            "schema": json_schema_for(Weather),
        },
    }


def test_no_authorization_header_is_sent_without_api_key_env(chat: ChatServer) -> None:
    chat.then(answer_json({"city": "湛江", "temp_c": None}))
    ask(ChatCompletionsClient(chat.settings()))

    assert "authorization" not in chat.requests_to(CHAT_PATH)[0].headers


def walk(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from walk(value)


def test_generated_schema_has_no_refs_formats_or_defaults_and_requires_everything() -> None:
    schema = json_schema_for(QuerySemantics)
    nodes = list(walk(schema))

    banned = {"$ref", "$defs", "format", "default", "title"}
    assert [sorted(banned & set(node)) for node in nodes if banned & set(node)] == []
    objects = [node for node in nodes if node.get("type") == "object" or "properties" in node]
    assert len(objects) == 2  # the semantics and their time range, inlined
    for node in objects:
        assert node["required"] == list(node["properties"])
        assert node["additionalProperties"] is False
    assert schema["properties"]["location"]["type"] == ["string", "null"]
    assert schema["properties"]["answer_contract"]["enum"][-1] is None
    time_range = schema["properties"]["time_range"]["anyOf"]
    assert time_range[0]["properties"]["start"] == {"type": "string", "description": "YYYY-MM-DD"}


# --- the json_object retry --------------------------------------------------------------------


def test_a_400_to_json_schema_is_retried_once_in_json_mode_with_the_schema_in_the_prompt(
    chat: ChatServer,
) -> None:
    chat.then(
        api_error(400, "response_format json_schema is not supported"),
        answer_json({"city": "湛江", "temp_c": 24}),
        answer_json({"city": "北海", "temp_c": 22}),
    )
    client = ChatCompletionsClient(chat.settings())

    first = ask(client)
    second = ask(client)

    assert (first.value.city, first.mode) == ("湛江", "json_object")
    assert second.value.city == "北海"
    assert [body["response_format"]["type"] for body in chat.bodies] == [
        "json_schema",
        "json_object",
        "json_object",  # the client remembers what the endpoint takes
    ]
    retry = chat.bodies[1]["messages"]
    assert retry[0]["role"] == "system"
    assert "JSON" in retry[0]["content"]
    assert (
        json.dumps(json_schema_for(Weather), ensure_ascii=False, separators=(",", ":"))
        in (retry[0]["content"])
    )
    assert retry[1:] == chat.bodies[0]["messages"]


def test_a_400_in_json_mode_too_is_a_failure_without_further_requests(chat: ChatServer) -> None:
    chat.then(api_error(400, "bad schema"), api_error(400, "prompt too long"))
    error = failure(ChatCompletionsClient(chat.settings()))

    assert (error.reason, error.status) == ("http_status", 400)
    assert "prompt too long" in str(error)
    assert len(chat.bodies) == 2


# --- log-probabilities and usage ------------------------------------------------------------


def test_log_probabilities_and_usage_come_back_with_the_completion(chat: ChatServer) -> None:
    content = json.dumps({"city": "湛江", "temp_c": 24}, ensure_ascii=False)
    tokens = logprob_tokens(content, {"湛江": {"湛江": 0.8, "北海": 0.2}})
    chat.then(
        completion(
            content,
            logprobs=tokens,
            usage={"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
        )
    )
    client = ChatCompletionsClient(chat.settings())
    result = asyncio.run(client.complete(ASK, Weather, name="weather_extract", top_logprobs=3))

    assert (chat.bodies[0]["logprobs"], chat.bodies[0]["top_logprobs"]) == (True, 3)
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.total_tokens) == (120, 129)
    assert result.logprobs is not None
    assert "".join(token.token for token in result.logprobs) == content
    city = next(token for token in result.logprobs if token.token == "湛江")
    assert dict(city.top) == pytest.approx({"湛江": math.log(0.8), "北海": math.log(0.2)})


def test_without_asking_no_log_probabilities_are_requested(chat: ChatServer) -> None:
    chat.then(answer_json({"city": "湛江", "temp_c": 24}))
    result = ask(ChatCompletionsClient(chat.settings()))
    assert "logprobs" not in chat.bodies[0]
    assert result.logprobs is None


def test_a_400_to_log_probabilities_is_retried_without_them_and_they_are_not_asked_again(
    chat: ChatServer,
) -> None:
    chat.then(
        api_error(400, "logprobs is not supported by this model"),
        answer_json({"city": "湛江", "temp_c": 24}),
        answer_json({"city": "北海", "temp_c": 22}),
    )
    client = ChatCompletionsClient(chat.settings())

    async def twice() -> None:
        for _ in range(2):
            await client.complete(ASK, Weather, name="weather_extract", top_logprobs=5)

    asyncio.run(twice())
    assert [("logprobs" in body) for body in chat.bodies] == [True, False, False]
    assert client.mode == "json_schema"  # the json_schema mode was never in question


@pytest.mark.parametrize(
    "logprobs",
    [
        {"content": [{"token": "{", "logprob": "high", "top_logprobs": []}]},
        {"content": [{"token": "{", "logprob": -0.1}]},
        {"content": "tokens"},
    ],
)
def test_malformed_log_probabilities_are_dropped_and_the_reply_still_counts(
    chat: ChatServer, logprobs: Any
) -> None:
    reply = completion(json.dumps({"city": "湛江", "temp_c": 24}))
    data = json.loads(reply.body_bytes())
    data["choices"][0]["logprobs"] = logprobs
    data["usage"] = {"prompt_tokens": True, "completion_tokens": 3}
    chat.then(Reply(200, json.dumps(data), content_type="application/json"))
    client = ChatCompletionsClient(chat.settings())
    result = asyncio.run(client.complete(ASK, Weather, name="weather_extract", top_logprobs=2))
    assert result.value.city == "湛江"
    assert result.logprobs is None
    assert result.usage is None


def test_top_logprobs_outside_1_to_20_is_an_input_error(chat: ChatServer) -> None:
    client = ChatCompletionsClient(chat.settings())
    with pytest.raises(InputError, match="top_logprobs"):
        asyncio.run(client.complete(ASK, Weather, name="weather_extract", top_logprobs=21))
    assert chat.bodies == []


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (completion('{"city": "湛'), "invalid_json"),
        (completion('{"city": "湛江", "temp_c": 24} trailing'), "invalid_json"),
        (completion('{"city": "湛江", "city": "北海", "temp_c": 1}'), "invalid_json"),
        (completion('{"city": "湛江", "temp_c": NaN}'), "invalid_json"),
        (answer_json({"city": "湛江", "temp_c": "24"}), "schema_violation"),
        (answer_json({"city": "湛江", "temp_c": 24, "source": "x"}), "schema_violation"),
        (answer_json({"city": "湛江"}), "schema_violation"),
        (answer_json(["湛江", 24]), "schema_violation"),
        (completion('{"city": "湛江", "temp', finish_reason="length"), "truncated"),
        (completion(None, refusal="I can't help with that."), "refused"),
        (completion(None, finish_reason="content_filter"), "refused"),
        (completion(None, finish_reason="tool_calls"), "invalid_response"),
        (completion("   "), "empty_reply"),
        (Reply(200, "<html>proxy page</html>"), "invalid_response"),
        (Reply(200, '{"object": "chat.completion", "choices": []}'), "invalid_response"),
        (Reply(302, "", headers={"Location": "http://evil.example/"}), "http_status"),
        (api_error(404, "model 'fake-model' not found", "not_found_error"), "http_status"),
    ],
)
def test_unusable_replies_raise_llm_errors_with_a_reason(
    chat: ChatServer, reply: Reply, reason: str
) -> None:
    chat.then(reply)
    error = failure(ChatCompletionsClient(chat.settings()))

    assert error.reason == reason
    assert isinstance(error, ExternalQueryError)
    assert len(chat.bodies) == 1


def test_a_thinking_block_and_a_code_fence_around_the_json_are_removed(chat: ChatServer) -> None:
    chat.then(completion('<think>湛江在广东</think>\n```json\n{"city": "湛江", "temp_c": 24}\n```'))

    result = ask(ChatCompletionsClient(chat.settings()))

    assert result.value == Weather(city="湛江", temp_c=24)
    assert result.content == '{"city": "湛江", "temp_c": 24}'


def test_a_slow_endpoint_times_out(chat: ChatServer) -> None:
    slow = answer_json({"city": "湛江", "temp_c": 24})
    slow.delay_s = 2.0
    chat.then(slow)

    error = failure(ChatCompletionsClient(chat.settings(timeout_s=0.2)))

    assert error.reason == "timeout"
    assert error.transient


def test_a_reply_larger_than_the_cap_is_refused(chat: ChatServer) -> None:
    chat.then(Reply(200, chunks=[b"x" * 65536] * 20, content_type="application/json"))

    assert failure(ChatCompletionsClient(chat.settings())).reason == "response_too_large"


def test_a_compressed_reply_is_refused_unread(chat: ChatServer) -> None:
    chat.then(Reply(200, b"\x1f\x8b", "application/json", headers={"Content-Encoding": "gzip"}))

    assert failure(ChatCompletionsClient(chat.settings())).reason == "invalid_response"


def test_transient_failures_are_retried_up_to_max_retries(chat: ChatServer) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    chat.then(
        api_error(503, "overloaded", "api_error"),
        Reply(429, "{}", "application/json", headers={"Retry-After": "999999"}),
        answer_json({"city": "湛江", "temp_c": 24}),
    )
    client = ChatCompletionsClient(chat.settings(max_retries=2), sleep=record)

    assert ask(client).value.city == "湛江"
    assert len(chat.bodies) == 3
    assert waits[0] > 0
    assert waits[1] == 8.0  # a hostile Retry-After is capped


def test_retries_stop_at_max_retries(chat: ChatServer) -> None:
    chat.then(*[api_error(500, "boom", "api_error")] * 3)
    client = ChatCompletionsClient(chat.settings(max_retries=1), sleep=no_sleep)

    error = failure(client)

    assert (error.reason, error.status) == ("http_status", 500)
    assert len(chat.bodies) == 2


def test_client_errors_other_than_rate_limits_are_not_retried(chat: ChatServer) -> None:
    chat.then(api_error(404, "no such model"), answer_json({"city": "湛江", "temp_c": 1}))
    client = ChatCompletionsClient(chat.settings(max_retries=3), sleep=no_sleep)

    assert failure(client).status == 404
    assert len(chat.bodies) == 1


def test_one_client_serves_two_successive_event_loops(chat: ChatServer) -> None:
    chat.then(*[answer_json({"city": "湛江", "temp_c": 24})] * 2)
    client = ChatCompletionsClient(chat.settings())

    assert ask(client).value.city == "湛江"
    assert ask(client).value.city == "湛江"


# --- the endpoint -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "endpoint"),
    [
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1/chat/completions"),
        ("http://localhost:8080/v1/", "http://localhost:8080/v1/chat/completions"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1/chat/completions"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
    ],
)
def test_endpoint_is_the_chat_completions_path_under_the_base_url(
    base_url: str, endpoint: str
) -> None:
    client = ChatCompletionsClient(LLMSettings(base_url=base_url, model="m"))

    assert client.endpoint == endpoint


@pytest.mark.parametrize(
    "base_url",
    [
        "http://llm.example.com/v1",  # the key and the question would travel in clear text
        "http://10.0.0.5:8000/v1",
        "ftp://127.0.0.1/v1",
        "https://user:pass@api.example.com/v1",
        "https://api.example.com/v1?key=abc",
        "not a url",
    ],
)
def test_unsafe_or_malformed_base_urls_are_settings_errors(base_url: str) -> None:
    with pytest.raises(SettingsError):
        ChatCompletionsClient(LLMSettings(base_url=base_url, model="m"))


# --- the API key --------------------------------------------------------------------------------


def test_api_key_is_read_from_the_environment_at_call_time(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-at-construction")
    client = ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV))
    monkeypatch.setenv(KEY_ENV, SECRET)
    chat.then(answer_json({"city": "湛江", "temp_c": 24}))

    ask(client)

    assert chat.requests_to(CHAT_PATH)[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(vars(client))
    assert "sk-at-construction" not in repr(vars(client))


def test_credential_values_are_read_at_call_time_and_never_kept(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-at-construction")
    client = ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV))
    monkeypatch.setenv(KEY_ENV, f" {SECRET}\n")

    assert client.credential_values() == (SECRET,)
    assert SECRET not in repr(vars(client))
    monkeypatch.delenv(KEY_ENV)
    assert client.credential_values() == ()
    assert ChatCompletionsClient(chat.settings()).credential_values() == ()


def test_a_missing_api_key_fails_before_anything_is_sent(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    error = failure(ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV)))

    assert error.reason == "missing_api_key"
    assert KEY_ENV in str(error)
    assert chat.bodies == []


def strings_reachable_from(error: BaseException) -> Iterator[str]:
    """Text an exception exposes: message, args, chained exceptions, formatted traceback,
    and the values (requests and headers too) held by every frame of every traceback."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    yield "".join(traceback.format_exception(error))
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield str(current)
        yield repr(current.args)
        yield repr(vars(current))
        for chained in (current.__cause__, current.__context__):
            if chained is not None:
                pending.append(chained)
        tb: types.TracebackType | None = current.__traceback__
        while tb is not None:
            for value in tb.tb_frame.f_locals.values():
                yield from _texts(value)
            tb = tb.tb_next


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str | bytes):
        yield value if isinstance(value, str) else value.decode("latin-1")
    elif isinstance(value, httpx.Request | httpx.Response):
        yield repr(value.headers.raw)
    elif isinstance(value, httpx.Headers):
        yield repr(value.raw)
    elif isinstance(value, dict | list | tuple):
        yield repr(value)


@pytest.mark.parametrize(
    "reply",
    [
        api_error(401, f"Incorrect API key provided: {SECRET}.", "invalid_request_error"),
        api_error(500, f"internal error while checking {SECRET}", "api_error"),
        completion("not json"),
    ],
)
def test_api_key_never_appears_in_errors_tracebacks_or_logs(
    chat: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    chat.then(reply)
    caplog.set_level(logging.DEBUG)

    error = failure(ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV)))

    assert chat.requests_to(CHAT_PATH)[0].headers["authorization"] == f"Bearer {SECRET}"
    leaks = [text for text in strings_reachable_from(error) if SECRET in text]
    assert leaks == []
    assert caplog.records  # httpx logged the request: the check below looked at real logs
    assert SECRET not in caplog.text


def test_api_key_is_not_in_a_timeout_error_either(
    chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    slow = answer_json({"city": "湛江", "temp_c": 24})
    slow.delay_s = 2.0
    chat.then(slow)

    error = failure(ChatCompletionsClient(chat.settings(api_key_env=KEY_ENV, timeout_s=0.2)))

    assert error.reason == "timeout"
    assert [text for text in strings_reachable_from(error) if SECRET in text] == []
