"""From token log-probabilities to a distribution over the offered options, and the gate."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from external_query_service.llm import TokenLogprob
from external_query_service.toolkit import TaskSpec, load_task
from external_query_service.toolkit._confidence import (
    Thresholds,
    choice_distribution,
    judge,
    string_values,
)
from tests.support.toolkit_tasks import run_cli, write

OFFERED = ["o-3fa9", "o-3fb1", "o-77c2"]


def token(text: str, probability: float = 1.0, **others: float) -> TokenLogprob:
    top = {text: probability} | {key.replace("_", "-"): p for key, p in others.items()}
    return TokenLogprob(
        token=text,
        logprob=math.log(probability),
        top=tuple((t, math.log(p)) for t, p in top.items()),
    )


def tokens_of(*pieces: TokenLogprob) -> tuple[list[TokenLogprob], str]:
    return list(pieces), "".join(piece.token for piece in pieces)


def test_string_values_skip_quoted_keys_inside_other_strings() -> None:
    text = '{"note": "not \\"tool\\": here", "tool": "web.follow", "options": ["o-1", "o-2"]}'
    found = string_values(text)
    assert [raw for _, raw in found["tool"]] == ["web.follow"]
    assert [raw for _, raw in found["options"]] == ["o-1", "o-2"]
    start, raw = found["tool"][0]
    assert text[start : start + len(raw)] == raw


def test_string_values_ignore_strings_inside_nested_objects() -> None:
    found = string_values('{"a": {"b": "c"}, "d": "e"}')
    assert set(found) == {"d"}


def test_an_id_split_over_tokens_gets_the_probability_of_each_branch() -> None:
    pieces, text = tokens_of(
        token('{"options": ["'),
        token("o"),
        token("-"),
        token("3", 0.8, **{"7": 0.2}),
        token("fa", 0.75, fb=0.25),
        token("9"),
        token('"]}'),
    )
    start = string_values(text)["options"][0][0]
    distribution = choice_distribution(pieces, start, OFFERED)
    assert distribution == pytest.approx({"o-3fa9": 0.6, "o-3fb1": 0.2, "o-77c2": 0.2})


def test_a_token_spanning_the_opening_quote_is_read_from_the_value_on() -> None:
    pieces, text = tokens_of(
        token('{"tool": '),
        token('"o-3', 0.5, **{'"o-7': 0.3, '"x': 0.2}),
        token("fa9"),
        token('"}'),
    )
    start = string_values(text)["tool"][0][0]
    distribution = choice_distribution(pieces, start, OFFERED)
    # "x…" fits no offered value: its 0.2 is dropped and the rest normalized.
    assert distribution == pytest.approx({"o-3fa9": 0.5 / 0.8, "o-3fb1": 0.0, "o-77c2": 0.3 / 0.8})


def test_a_value_that_was_not_offered_has_no_distribution() -> None:
    pieces, text = tokens_of(token('{"tool": "'), token("o-999"), token('"}'))
    start = string_values(text)["tool"][0][0]
    assert choice_distribution(pieces, start, OFFERED) is None


def test_a_single_offered_value_is_certain() -> None:
    pieces, text = tokens_of(token('{"tool": "'), token("o-3fa9", 0.4), token('"}'))
    start = string_values(text)["tool"][0][0]
    assert choice_distribution(pieces, start, ["o-3fa9"]) == {"o-3fa9": 1.0}


@pytest.mark.parametrize(
    ("distribution", "selection", "passed"),
    [
        ({"a": 0.60, "b": 0.40}, "match", True),
        ({"a": 0.60, "b": 0.55}, "match", False),  # likely, but no clear lead
        ({"a": 0.50, "b": 0.10}, "match", False),  # a clear lead, but not likely enough
        ({"a": 0.31, "b": 0.30}, "explore", True),
        ({"a": 0.29, "b": 0.10}, "explore", False),
    ],
)
def test_the_gate_applies_the_match_and_explore_thresholds(
    distribution: dict[str, float], selection: str, passed: bool
) -> None:
    figures = judge("x", "a", distribution, selection, Thresholds())  # type: ignore[arg-type]
    assert figures.passed is passed
    assert figures.runner_up == distribution["b"]


def test_delegation_rules_are_validated_task_file_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = 'name = "x"\nsource = "web"\nreports_dir = "r"\n[delegation]\n'
    spec, _ = load_task(
        write(
            tmp_path / "ok.toml", head + "min_probability = 0.7\nmax_steps = 12\ntimeout_s = 60\n"
        )
    )
    assert (spec.delegation.min_probability, spec.delegation.max_steps) == (0.7, 12)
    assert spec.delegation.timeout_s == 60.0
    for line, message in [
        ("min_probability = 1.5", "min_probability"),
        ('max_steps = "10"', "max_steps"),
        ("save_incomplete = 1", "save_incomplete"),
        ("temperature = 0.1", "unknown key"),
    ]:
        code, _, err = run_cli(["check-task", str(write(tmp_path / "t.toml", head + line))], capsys)
        assert code == 2
        assert message in err


def test_a_task_without_delegation_rules_keeps_its_digest() -> None:
    plain = TaskSpec(name="w", source="workspace", reports_dir="out")
    assert plain.digest == "sha256:" + _sha(
        '{"budget":{"max_bytes":5000000,"max_depth":2,"max_file_bytes":1000000,"max_files":2000,'
        '"max_pages":10,"max_records_per_category":3},"description":"","name":"w",'
        '"reports_dir":"out","required":null,"source":"workspace"}'
    )
    tuned = TaskSpec.model_validate(
        {"name": "w", "source": "workspace", "reports_dir": "out", "delegation": {"max_steps": 5}}
    )
    assert tuned.digest != plain.digest


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
