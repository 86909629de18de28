from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from external_query_service.text._targets import (
    MATCH_THRESHOLD,
    best_match,
    matches_target,
    mentions_target,
    normalize_for_match,
    target_forms,
)


def test_normalization_folds_width_case_script_and_whitespace() -> None:
    assert normalize_for_match("ＡＢＣ 臺灣\t天氣\n") == "abc台湾天气"


def test_plan_name_inside_a_longer_place_name_scores_full_marks() -> None:
    assert matches_target("湛江", "湛江市今天多云") == 100


def test_place_names_sharing_one_character_do_not_match() -> None:
    assert matches_target("江门市", "湛江市今天多云") < MATCH_THRESHOLD
    assert matches_target("江门", "湛江今天多云，气温 26 度") < MATCH_THRESHOLD


def test_traditional_spelling_matches_simplified_text() -> None:
    assert matches_target("臺北", "台北市明日天气") == 100


def test_full_width_currency_code_matches_lower_case_ascii() -> None:
    assert matches_target("ＵＳＤ", "1 usd = 7.10 cny") == 100


def test_spaces_inside_a_name_do_not_prevent_a_match() -> None:
    assert matches_target("New York", "Weather in newyork today") == 100


def test_short_provider_alias_covers_a_longer_plan_name() -> None:
    # The page title does not name the place; the geocoder's localised name does.
    assert best_match("湛江港", ("Weather forecast", "多云转晴", "湛江")) == 100


def test_joined_texts_would_hide_the_alias_so_each_text_is_scored_alone() -> None:
    # 港 (port) is part of the name, not an administrative division: no form drops it.
    assert matches_target("湛江港", "Weather forecast 多云转晴 湛江") < MATCH_THRESHOLD
    assert mentions_target("湛江港", ("Weather forecast 多云转晴", "湛江"))


def test_a_place_matches_with_or_without_its_division_word_both_ways() -> None:
    assert matches_target("湛江市", "Weather forecast 多云转晴 湛江") == 100
    assert matches_target("湛江", "湛江市今天多云") == 100
    assert matches_target("廣東省", "广东今天多云") == 100
    assert matches_target("香港特别行政区", "香港天文台：今日天晴") == 100
    assert matches_target("Zhanjiang City", "Weather in Zhanjiang today") == 100
    assert matches_target("Hebei Province", "hebei is dry") == 100


def test_division_words_are_dropped_only_as_a_suffix_leaving_a_name() -> None:
    assert target_forms("湛江市") == ("湛江市", "湛江")
    assert target_forms("北区") == ("北区",)  # one character would be left
    assert target_forms("Electricity") == ("electricity",)  # not a whole word
    assert target_forms("Orange County") == ("orangecounty", "orange")
    assert target_forms("  ") == ()
    # Dropping the suffix never makes different places match.
    assert matches_target("江门市", "湛江今天多云") < MATCH_THRESHOLD


def test_empty_target_or_text_scores_zero() -> None:
    assert matches_target("", "湛江") == 0
    assert matches_target("湛江", "  ") == 0
    assert best_match("湛江", ()) == 0


@given(st.text(max_size=30), st.text(max_size=80))
def test_score_is_an_integer_between_zero_and_one_hundred(target: str, text: str) -> None:
    score = matches_target(target, text)
    assert isinstance(score, int)
    assert 0 <= score <= 100


ascii_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", max_size=20)


@given(ascii_words, ascii_words.filter(bool), ascii_words)
def test_a_target_embedded_in_any_text_scores_full_marks(
    before: str, target: str, after: str
) -> None:
    assert matches_target(target.upper(), before + target + after) == 100
