"""Content addressing: RFC 8785 vectors, strict loading, key-order invariance, golden ids."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from external_query_service.admission import (
    HASH_CONTRACT,
    EvidenceInputError,
    canonical_json,
    content_id,
    loads_record,
    loads_value,
)

# The cyberphone "weird" vector: keys must sort by UTF-16 code units, so the emoji
# (surrogates D83D DE00) sorts before U+FB33 although its code point is larger.
WEIRD_INPUT = (
    '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", '
    '"\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", '
    '"\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", '
    '"\\u00f6": "Latin Small Letter O With Diaeresis"}'
)
WEIRD_EXPECTED = (
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
    '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
    '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
).encode()

# The cyberphone "values" vector: ES6 number formatting and minimal string escaping.
VALUES_INPUT = (
    '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
    ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
    ' "literals": [null, true, false]}'
)
VALUES_EXPECTED = (
    '{"literals":[null,true,false],'
    '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
).encode()


# The cyberphone "structures" vector (its one number, 56.0, is a float: the pinned library
# takes it as given, our loader refuses it, and the integer form canonicalises alike).
STRUCTURES_INPUT = (
    '{"1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0}, "10": { }, "": "empty", "a": { },'
    ' "111": [ {"e": "yes","E": "no" } ], "A": { }}'
)
STRUCTURES_EXPECTED = (
    b'{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],'
    b'"A":{},"a":{}}'
)
# The cyberphone "french" vector: no locale collation, plain code units.
FRENCH_INPUT = (
    '{"peach": "This sorting order", "p\u00e9ch\u00e9": "is wrong according to French",'
    ' "p\u00eache": "but canonicalization MUST", "sin": "ignore locale"}'
)
FRENCH_EXPECTED = (
    '{"peach":"This sorting order","p\u00e9ch\u00e9":"is wrong according to French",'
    '"p\u00eache":"but canonicalization MUST","sin":"ignore locale"}'
).encode()
# The cyberphone "unicode" vector: strings are not Unicode-normalized.
UNICODE_INPUT = '{"Unnormalized Unicode":"A\\u030a"}'
UNICODE_EXPECTED = '{"Unnormalized Unicode":"A\u030a"}'.encode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [(FRENCH_INPUT, FRENCH_EXPECTED), (UNICODE_INPUT, UNICODE_EXPECTED)],
    ids=["french", "unicode"],
)
def test_cyberphone_string_vectors_are_byte_exact(text: str, expected: bytes) -> None:
    assert canonical_json(loads_value(text)) == expected


def test_structures_vector_is_byte_exact_and_its_float_is_refused_by_our_loader() -> None:
    assert rfc8785.dumps(json.loads(STRUCTURES_INPUT)) == STRUCTURES_EXPECTED
    with pytest.raises(EvidenceInputError) as caught:
        loads_value(STRUCTURES_INPUT)
    assert caught.value.reason == "float_in_hashed_record"
    as_integer = STRUCTURES_INPUT.replace("56.0", "56")
    assert canonical_json(loads_value(as_integer)) == STRUCTURES_EXPECTED


def test_utf16_key_order_vector_is_byte_exact() -> None:
    assert canonical_json(loads_value(WEIRD_INPUT)) == WEIRD_EXPECTED


def test_sorting_keys_by_code_point_fails_the_utf16_vector() -> None:
    naive = json.dumps(
        json.loads(WEIRD_INPUT), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert naive.encode() != WEIRD_EXPECTED


def test_pinned_canonicaliser_formats_numbers_like_es6() -> None:
    # Floats never enter our hashed records, but the pinned library must still pass
    # the standard's number vector: it is the canonicaliser we rely on.
    assert rfc8785.dumps(json.loads(VALUES_INPUT)) == VALUES_EXPECTED


def test_string_escaping_and_literals_follow_the_vector() -> None:
    value = loads_value(
        '{"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false], "int": -9007199254740991}'
    )
    assert (
        canonical_json(value)
        == (
            '{"int":-9007199254740991,"literals":[null,true,false],'
            '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        ).encode()
    )


def test_ids_read_sha256_and_the_contract_is_versioned() -> None:
    assert canonical_json({"b": 1, "a": 2}) == b'{"a":2,"b":1}'
    assert content_id({"b": 1, "a": 2}) == (
        "sha256:d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772"
    )
    assert HASH_CONTRACT == "rfc8785-sha256/v0"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "invalid_json"),
        ("[NaN]", "invalid_json"),
        ('{"x": Infinity}', "invalid_json"),
        ('{"x": "\\ud800"}', "lone_surrogate"),
        ('{"\\udc00": 1}', "lone_surrogate"),
        ('{"score": 0.5}', "float_in_hashed_record"),
        ('{"big": 9007199254740992.0}', "float_in_hashed_record"),
        ('{"big": 9007199254740992}', "integer_out_of_range"),
        ('{"big": -9007199254740992}', "integer_out_of_range"),
        ('{"huge": ' + "9" * 5000 + "}", "integer_out_of_range"),
        ('{"a": ', "invalid_json"),
        ("[" * 100 + "]" * 100, "invalid_json"),
        ("[" * 100_000, "invalid_json"),
    ],
)
def test_strict_loader_rejects_with_a_named_reason(text: str, reason: str) -> None:
    with pytest.raises(EvidenceInputError) as caught:
        loads_value(text, origin="input.json")
    assert caught.value.reason == reason
    assert str(caught.value).startswith("input.json: ")


def test_a_valid_surrogate_pair_is_one_character_and_accepted() -> None:
    assert loads_value('"\\ud83d\\ude00"') == "\U0001f600"


def test_record_root_must_be_an_object() -> None:
    with pytest.raises(EvidenceInputError) as caught:
        loads_record("[1, 2]")
    assert caught.value.reason == "non_object_root"


def test_canonical_json_refuses_floats_handed_in_from_python() -> None:
    with pytest.raises(EvidenceInputError) as caught:
        canonical_json({"rate": 7.1234})
    assert caught.value.reason == "float_in_hashed_record"


# -- properties ----------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
)
json_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), children, max_size=4
        )
    ),
    max_leaves=20,
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@settings(max_examples=150, deadline=None)
@given(value=json_values, seed=st.integers(0, 2**32 - 1))
def test_content_id_is_invariant_under_key_order(value: Any, seed: int) -> None:
    assert content_id(_shuffled(value, random.Random(seed))) == content_id(value)


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_canonical_form_round_trips_through_the_strict_loader(value: Any) -> None:
    once = canonical_json(value)
    assert canonical_json(loads_value(once.decode("utf-8"))) == once


_JSON_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | _JSON_TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | _JSON_TEXT, inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)  # a property, not a timing
@given(st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=6))
def test_canonical_bytes_are_rfc8785s_whichever_writer_is_used(record: dict[str, object]) -> None:
    try:
        expected = rfc8785.dumps(record)  # type: ignore[arg-type]
    except rfc8785.CanonicalizationError:
        return
    assert canonical_json(record) == expected
