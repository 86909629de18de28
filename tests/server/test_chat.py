"""The OpenAI-compatible routes over real HTTP (uvicorn on 127.0.0.1), driven by the real
``openai`` client as a chat front-end would: streamed and not, refusals, keys and limits."""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.testing import World
from tests.support.air_show import QUESTION, slow_world_settings
from tests.support.paths import REPO
from tests.support.serving import DOCS_QUESTION, write_docs

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("openai")

import openai

from external_query_service.server import ServerThread

KEY = "k-chat-" + "s3cret" * 4
#: Pages analysed in a thread: no worker processes warmed up for a wire format.
IN_THREAD = {"analysis": {"processes": 0}}


def docs_service(folder: Path, **server: Any) -> ExternalQueryService:
    settings = Settings.from_mapping({"server": server, **IN_THREAD})
    return ExternalQueryService(settings.with_docs(write_docs(folder)))


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """``serve --docs``: one local_docs source, no keys."""
    with ServerThread(docs_service(tmp_path_factory.mktemp("docs"))) as server:
        yield server


@pytest.fixture
def client(docs_server: ServerThread) -> Iterator[Any]:
    with openai.OpenAI(
        base_url=f"{docs_server.url}/v1", api_key="unused", max_retries=0, timeout=30
    ) as opened:
        yield opened


def user(*questions: str) -> list[dict[str, str]]:
    """A conversation of user turns, each answered by an assistant turn but the last."""
    turns: list[dict[str, str]] = []
    for question in questions:
        turns += [{"role": "user", "content": question}, {"role": "assistant", "content": "..."}]
    return turns[:-1]


def streamed(client: Any, messages: list[dict[str, Any]]) -> list[Any]:
    return list(client.chat.completions.create(model="any", messages=messages, stream=True))


def test_the_model_list_holds_external_query_alone(client: Any) -> None:
    assert [model.id for model in client.models.list()] == ["external-query"]


def test_a_chat_completion_is_the_answer_text_ending_with_its_sources(client: Any) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": DOCS_QUESTION}]
    )
    assert reply.object == "chat.completion"
    assert reply.model == "gpt-4o"  # whatever name is sent is answered
    message = reply.choices[0].message
    assert message.role == "assistant"
    assert reply.choices[0].finish_reason == "stop"
    structured = reply.model_extra["external_query"]
    assert structured["status"] == "answered"
    assert structured["evidence"]
    assert "\nSources:\n1. Site: docs; title: Verifier" in message.content
    assert message.content.rstrip().endswith("`docs://docs/verifier.md`")
    assert structured["sources"][0]["url"] == "docs://docs/verifier.md"


def test_a_refusal_is_an_ordinary_assistant_message(client: Any) -> None:
    reply = client.chat.completions.create(
        model="external-query",
        messages=[{"role": "user", "content": "What is the capital of the planet Mars?"}],
    )
    structured = reply.model_extra["external_query"]
    assert structured["status"] == "insufficient_evidence"
    assert structured["reason"] is not None
    assert reply.choices[0].message.content.startswith("External live query:")


def test_text_parts_of_a_message_are_its_question(client: Any) -> None:
    parts = [{"type": "text", "text": DOCS_QUESTION}]
    reply = client.chat.completions.create(
        model="external-query", messages=[{"role": "user", "content": parts}]
    )
    assert reply.model_extra["external_query"]["status"] == "answered"


def test_a_streamed_completion_sends_progress_then_the_answer_then_done(client: Any) -> None:
    chunks = streamed(client, [{"role": "user", "content": DOCS_QUESTION}])
    assert chunks[0].choices[0].delta.role == "assistant"
    events = [chunk.model_extra["external_query"]["event"] for chunk in chunks[1:4]]
    assert events == ["plan", "attempt", "verified"]
    thinking = [
        chunk.choices[0].delta.model_extra.get("reasoning_content") for chunk in chunks[1:4]
    ]
    assert thinking[0].startswith("plan: documentation")  # --docs only: a documentation question
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["external_query"]["status"] == "answered"
    plain = client.chat.completions.create(
        model="external-query", messages=[{"role": "user", "content": DOCS_QUESTION}]
    )
    assert text.split("accessed:")[0] == plain.choices[0].message.content.split("accessed:")[0]
    assert "\nSources:\n" in text


def test_earlier_user_turns_make_the_question_a_follow_up(client: Any) -> None:
    alone = streamed(client, user("And the presenter?"))
    after = streamed(client, user(DOCS_QUESTION, "And the presenter?"))
    assert alone[1].model_extra["external_query"]["data"]["source"] != "follow_up"
    plan = after[1].model_extra["external_query"]["data"]
    assert (plan["source"], plan["query_kind"]) == ("follow_up", "documentation")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([{"role": "user", "content": "   "}], "empty_question"),
        ([{"role": "system", "content": "Be brief."}], "invalid_request"),
        ([{"role": "user", "content": "x" * 20_001}], "question_too_long"),
    ],
    ids=["blank", "no-user-message", "too-long"],
)
def test_an_invalid_chat_request_is_a_422_before_any_chunk(
    docs_server: ServerThread, messages: list[dict[str, str]], reason: str, stream: bool
) -> None:
    reply = httpx.post(
        f"{docs_server.url}/v1/chat/completions",
        json={"model": "external-query", "messages": messages, "stream": stream},
        timeout=30,
    )
    assert reply.status_code == 422
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["error"]["reason"] == reason


def test_the_openai_client_sees_a_bad_request_as_its_error(client: Any) -> None:
    with pytest.raises(openai.UnprocessableEntityError, match="the question is empty"):
        streamed(client, [{"role": "user", "content": " "}])


def test_a_missing_or_wrong_key_is_401_and_a_spent_rate_is_429(tmp_path: Path) -> None:
    service = docs_service(
        tmp_path,
        api_key_hashes=["sha256:" + hashlib.sha256(KEY.encode()).hexdigest()],
        requests_per_minute=2,
    )
    messages = [{"role": "user", "content": DOCS_QUESTION}]
    with ServerThread(service) as server:
        base = f"{server.url}/v1"
        # The client insists on some key, so the missing one is sent without it.
        missing = httpx.post(
            f"{base}/chat/completions", json={"model": "m", "messages": messages}, timeout=30
        )
        with (
            openai.OpenAI(base_url=base, api_key="wrong-key", max_retries=0) as stranger,
            pytest.raises(openai.AuthenticationError),
        ):
            stranger.chat.completions.create(model="external-query", messages=messages)
        with openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=30) as keyed:
            first = keyed.chat.completions.create(model="external-query", messages=messages)
            second = keyed.chat.completions.create(
                model="external-query", messages=messages, stream=True
            )
            assert list(second)[-1].choices[0].finish_reason == "stop"
            with pytest.raises(openai.RateLimitError) as refused:
                keyed.chat.completions.create(model="external-query", messages=messages)
    assert missing.status_code == 401
    assert first.model_extra["external_query"]["status"] == "answered"
    assert refused.value.status_code == 429
    assert int(refused.value.response.headers["Retry-After"]) >= 1


def test_the_http_service_doc_chat_example_runs_as_written(
    docs_server: ServerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = (REPO / "docs" / "http_service.md").read_text(encoding="utf-8")
    section = reference.split("\n## Chat front-ends: OpenAI's format\n", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    exec(code.replace("http://127.0.0.1:8080", docs_server.url), {})
    printed = capsys.readouterr().out
    plain, rest = printed.split("\nanswered\n", 1)
    assert "\nSources:\n1. Site: docs" in plain
    assert rest.split("accessed:")[0] == plain.split("accessed:")[0]
    toml = re.findall(r"```toml\n(.*?)```", section, flags=re.DOTALL)[0]
    served = Settings.from_mapping(tomllib.loads(toml)).server
    assert "host.docker.internal" in served.allowed_hosts


def test_a_chat_question_past_the_deadline_is_504_or_an_error_chunk() -> None:
    with World() as world:
        settings = slow_world_settings(world, 3000).model_copy(
            update={"server": Settings().server.model_copy(update={"request_deadline_s": 0.3})}
        )
        messages = [{"role": "user", "content": QUESTION}]
        with ServerThread(ExternalQueryService(settings)) as server:
            plain = httpx.post(
                f"{server.url}/v1/chat/completions",
                json={"model": "m", "messages": messages},
                timeout=30,
            )
            with httpx.stream(
                "POST",
                f"{server.url}/v1/chat/completions",
                json={"model": "m", "messages": messages, "stream": True},
                timeout=30,
            ) as reply:
                lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    assert plain.status_code == 504
    assert plain.json()["error"]["reason"] == "deadline_exceeded"
    assert lines[-1] == "data: [DONE]"
    assert '"reason": "deadline_exceeded"' in lines[-2]
    assert lines[-2].startswith('data: {"error": ')


def test_streamed_progress_arrives_while_the_page_is_still_held() -> None:
    from external_query_service.testing import Reply
    from tests.support.air_show import PAGE, HeldPage, held_world

    held = HeldPage(Reply(body=PAGE))
    with World() as world:
        service = held_world(world, held)
        with (
            ServerThread(service) as server,
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client,
        ):
            stream = client.chat.completions.create(
                model="external-query",
                messages=[{"role": "user", "content": QUESTION}],
                stream=True,
            )
            chunks = iter(stream)
            assert next(chunks).choices[0].delta.role == "assistant"
            plan = next(chunks)
            assert plan.model_extra["external_query"]["event"] == "plan"
            assert not held.served.is_set()  # the page is still held back
            held.release.set()
            rest = list(chunks)
    assert rest[-1].choices[0].finish_reason == "stop"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in rest)
