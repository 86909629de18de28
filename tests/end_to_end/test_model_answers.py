"""A configured model plans and writes through the service; the CLI says which ran."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from external_query_service.cli import main
from external_query_service.testing import LoopbackServer, Reply
from tests.support.llm_chat import ChatServer, answer_json
from tests.support.world import World, forecast_reply, serve_zhanjiang_geocoding

NOW = "2026-11-30T10:00:00+08:00"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def cite_first_evidence(body: dict[str, Any]) -> Reply:
    prompt = "\n".join(message["content"] for message in body["messages"])
    evidence_id = re.search(r"ev-[0-9a-f]{12}", prompt)
    assert evidence_id is not None
    return answer_json(
        {"text": "湛江市12月1日多云，最高 24.1 °C [1]。", "citations": [evidence_id.group(0)]}
    )


def config(world: World, tmp_path: Path) -> Path:
    path = tmp_path / "live.toml"
    path.write_text(
        f"""
[network]
allowed_networks = ["127.0.0.1/32"]

[[adapters]]
kind = "open_meteo"
id = "weather"
base_url = "{world.base("/om/v1")}"
geocoding_url = "{world.base("/geo/v1")}"
""",
        encoding="utf-8",
    )
    return path


def test_cli_llm_flags_plan_and_write_the_answer_and_say_so(
    loopback: LoopbackServer, chat: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(loopback)
    serve_zhanjiang_geocoding(world)
    world.forecast(forecast_reply)
    chat.then(
        answer_json(
            {
                "query_kind": "weather",
                "location": "湛江",
                "time_range": {"start": "2026-12-01", "end": "2026-12-01"},
            }
        ),
        cite_first_evidence,
    )
    code = main(
        [
            "ask",
            "湛江明天天气怎么样？",
            "--config",
            str(config(world, tmp_path)),
            "--llm-base-url",
            chat.base_url,
            "--llm-model",
            "fake-model",
            "--now",
            NOW,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("外部实时查询：湛江市12月1日多云，最高 24.1 °C [1]。")
    assert "planner: structured" in out
    assert "presenter: llm" in out
    assert [body["model"] for body in chat.bodies] == ["fake-model", "fake-model"]


def test_a_model_inventing_a_number_falls_back_and_the_footer_says_why(
    loopback: LoopbackServer, chat: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(loopback)
    serve_zhanjiang_geocoding(world)
    world.forecast(forecast_reply)

    def invents(body: dict[str, Any]) -> Reply:
        good = json.loads(cite_first_evidence(body).body_bytes())
        content = json.loads(good["choices"][0]["message"]["content"])
        return answer_json({"text": "湛江市最高 35 °C [1]。", "citations": content["citations"]})

    chat.then(answer_json({"query_kind": "weather", "location": "湛江"}), invents)
    code = main(
        [
            "ask",
            "湛江今天天气？",
            "--config",
            str(config(world, tmp_path)),
            "--llm-base-url",
            chat.base_url,
            "--llm-model",
            "m",
            "--now",
            NOW,
        ]
    )
    out = capsys.readouterr().out
    answer, _, footer = out.partition("presenter: ")
    assert code == 0
    assert "35 °C" not in answer
    assert "24.1" in answer
    # The footer names the check and quotes the sentence it refused.
    assert footer.startswith("extractive (llm fallback: invented_number: 35 °C does not occur")
    assert "「湛江市最高 35 °C [1]。」" in footer


def test_bad_llm_flags_are_input_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ask", "q", "--llm-model", "m"])
    assert code == 2
    assert "--llm-*: base_url" in capsys.readouterr().err
