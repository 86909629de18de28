"""How sure a model was of a choice, from the log-probabilities of the tokens it wrote.

A delegated reply is a JSON object whose ``step`` object holds ``tool`` and one field per
parameter, strings from closed lists (tool names, option ids). ``object_start`` finds where
the ``step`` object starts; ``string_values`` finds where each of its top-level string
values (and each string of a top-level array) starts in the reply; ``choice_distribution`` walks
the tokens that wrote one value and turns their log-probabilities into a distribution over
the values that were on offer; ``judge`` applies the thresholds.

The walk follows the written value token by token. Where the offered values part ways, each
alternative token the server listed (``top_logprobs``) carries its probability to the values
it is a prefix of, weighted by the probability of the path so far; the written path keeps
the rest. An alternative that fits no offered value is dropped, and the result is
normalized over the offered values. An alternative shared by several values that part ways
later is split evenly among them (the server says nothing about the branches not taken).
Pure functions: no I/O, no model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .._frozen import Frozen
from ..llm._client import TokenLogprob

__all__ = [
    "ChoiceFigures",
    "Selection",
    "Thresholds",
    "choice_distribution",
    "judge",
    "object_start",
    "string_values",
]

Selection = Literal["match", "explore"]


@dataclass(frozen=True)
class Thresholds:
    """A ``match`` choice needs ``min_probability`` and a lead of ``min_margin`` over the
    next value; an ``explore`` choice (and the choice of tool) needs
    ``explore_min_probability`` and no margin."""

    min_probability: float = 0.55
    min_margin: float = 0.10
    explore_min_probability: float = 0.30


class ChoiceFigures(Frozen):
    """The gate's figures for one choice (the tool, or one parameter's option)."""

    field: str
    selection: Selection
    chosen: str
    probability: float
    runner_up: float
    offered: int
    passed: bool


def string_values(text: str, start: int = 0) -> dict[str, list[tuple[int, str]]]:
    """The top-level string values of the JSON object at ``text[start:]``, by key: each as
    ``(offset of its first character in text, raw characters between the quotes)``. An
    array of strings gives one entry per string; other values give none. Malformed text
    gives what was found before the fault."""
    found: dict[str, list[tuple[int, str]]] = {}
    stack: list[str] = []
    key: str | None = None
    expecting_key = False
    position = start
    while position < len(text):
        char = text[position]
        if char == '"':
            end = _string_end(text, position)
            if end < 0:
                break
            raw = text[position + 1 : end]
            if stack == ["{"] and expecting_key:
                key, expecting_key = raw, False
            elif key is not None and stack in (["{"], ["{", "["]):
                found.setdefault(key, []).append((position + 1, raw))
            position = end + 1
            continue
        if char in "{[":
            stack.append(char)
            expecting_key = stack == ["{"]
        elif char in "}]":
            stack.pop()
            if not stack:
                break
        elif char == "," and stack == ["{"]:
            expecting_key, key = True, None
        position += 1
    return found


def object_start(text: str, start: int, key: str) -> int | None:
    """Where the object that is the value of top-level ``key`` of the JSON object at
    ``text[start:]`` opens (the index of its ``{``); None when there is none."""
    depth = 0
    expecting_key = False
    current: str | None = None
    position = start
    while position < len(text):
        char = text[position]
        if char == '"':
            end = _string_end(text, position)
            if end < 0:
                return None
            if depth == 1 and expecting_key:
                current, expecting_key = text[position + 1 : end], False
            position = end + 1
            continue
        if char in "{[":
            if depth == 1 and char == "{" and current == key:
                return position
            depth += 1
            expecting_key = depth == 1
        elif char in "}]":
            depth -= 1
            if depth <= 0:
                return None
        elif char == "," and depth == 1:
            expecting_key, current = True, None
        position += 1
    return None


def _string_end(text: str, opening: int) -> int:
    """Index of the quote closing the string opened at ``opening`` (-1 when unclosed)."""
    position = opening + 1
    while position < len(text):
        if text[position] == "\\":
            position += 2
            continue
        if text[position] == '"':
            return position
        position += 1
    return -1


def _fits(value: str, written: str) -> bool:
    """``written`` (value characters so far, maybe past the closing quote) can still be
    ``value``."""
    whole = value + '"'
    return whole.startswith(written) or written.startswith(whole)


def choice_distribution(
    tokens: Sequence[TokenLogprob], start: int, offered: Sequence[str]
) -> dict[str, float] | None:
    """A distribution over ``offered`` for the value whose first character is at ``start``
    of the joined token text (see the module docstring). None when the written value is
    not one of ``offered``."""
    candidates = list(dict.fromkeys(offered))
    mass = dict.fromkeys(candidates, 0.0)
    live = candidates
    path = 1.0
    written = ""
    at = 0
    for token in tokens:
        begin, at = at, at + len(token.token)
        if at <= start:
            continue
        if len(live) <= 1:
            break
        lead = max(0, start - begin)  # characters before the value: the opening quote
        head = token.token[:lead]
        alternatives = dict(token.top)
        alternatives.pop(token.token, None)
        for alternative, logprob in alternatives.items():
            if not alternative.startswith(head):
                continue
            grown = written + alternative[lead:]
            shared = [value for value in live if _fits(value, grown)]
            for value in shared:
                mass[value] += path * math.exp(logprob) / len(shared)
        path *= math.exp(token.logprob)
        written += token.token[lead:]
        live = [value for value in live if _fits(value, written)]
        if not live:
            return None
    if not live:
        return None
    for value in live:
        mass[value] += path / len(live)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {value: share / total for value, share in mass.items()}


def judge(
    field: str,
    chosen: str,
    distribution: dict[str, float],
    selection: Selection,
    thresholds: Thresholds,
) -> ChoiceFigures:
    """Whether ``chosen`` clears the thresholds for ``selection`` under ``distribution``."""
    probability = distribution.get(chosen, 0.0)
    runner_up = max((p for value, p in distribution.items() if value != chosen), default=0.0)
    if selection == "explore":
        passed = probability >= thresholds.explore_min_probability
    else:
        passed = (
            probability >= thresholds.min_probability
            and probability - runner_up >= thresholds.min_margin
        )
    return ChoiceFigures(
        field=field,
        selection=selection,
        chosen=chosen,
        probability=round(probability, 4),
        runner_up=round(runner_up, 4),
        offered=len(distribution),
        passed=passed,
    )
