"""One strict JSON reader: every caller refuses the same texts, each in its own error type."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import external_query_service
from external_query_service._jsonio import load_json_file, loads_strict, read_text_file
from external_query_service.admission._canonical import loads_value
from external_query_service.errors import EvidenceInputError, InputError

REFUSED = [
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"a": NaN}', "NaN is not valid JSON"),
    ("[-Infinity]", "-Infinity is not valid JSON"),
    ('{"a": ', "Expecting value at line 1 column 7"),
    ("[" * 100_000, "too deeply nested"),
    ("[" + "1" * 5000 + "]", "not valid JSON"),
]


@pytest.mark.parametrize(("text", "detail"), REFUSED)
def test_the_plain_reader_refuses_with_an_input_error_naming_the_origin(
    text: str, detail: str
) -> None:
    with pytest.raises(InputError) as caught:
        loads_strict(text, origin="semantics.json")
    assert str(caught.value) == f"semantics.json: invalid JSON: {detail}"


@pytest.mark.parametrize(("text", "detail"), REFUSED[:-1])
def test_the_evidence_reader_refuses_the_same_texts_as_invalid_json(text: str, detail: str) -> None:
    with pytest.raises(EvidenceInputError) as caught:
        loads_value(text, origin="plan.json")
    assert (caught.value.reason, str(caught.value)) == ("invalid_json", f"plan.json: {detail}")


def test_the_evidence_reader_tightens_numbers_through_the_hooks() -> None:
    with pytest.raises(EvidenceInputError) as caught:
        loads_value("[" + "1" * 5000 + "]", origin="plan.json")
    assert caught.value.reason == "integer_out_of_range"
    assert loads_strict('{"x": 0.5}') == {"x": 0.5}


def test_a_file_refusal_names_the_file_once_in_either_vocabulary(tmp_path: Path) -> None:
    missing, latin1 = tmp_path / "missing.json", tmp_path / "latin1.json"
    latin1.write_bytes('{"q": "é"}'.encode("latin-1"))
    with pytest.raises(InputError, match=r"^.*missing\.json: file not found$"):
        load_json_file(missing)
    with pytest.raises(InputError, match=r"^.*latin1\.json: not UTF-8 text$"):
        load_json_file(latin1)
    with pytest.raises(EvidenceInputError) as caught:
        read_text_file(latin1, refuse=functools.partial(EvidenceInputError, origin=str(latin1)))
    assert (caught.value.reason, str(caught.value)) == (
        "invalid_json",
        f"{latin1}: not UTF-8 text",
    )
    with pytest.raises(EvidenceInputError) as caught:
        read_text_file(tmp_path, refuse=functools.partial(EvidenceInputError, origin="dir"))
    assert (caught.value.reason, str(caught.value)) == (
        "file_unreadable",
        "dir: not a regular file",
    )


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}')
    assert load_json_file(path) == {"a": 1}


def test_no_other_module_parses_json_with_its_own_strict_hooks() -> None:
    root = Path(external_query_service.__file__).parent
    owners = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "object_pairs_hook" in path.read_text(encoding="utf-8")
    )
    assert owners == ["_jsonio.py"]
