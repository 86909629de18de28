from __future__ import annotations

import pytest

from external_query_service.text._currencies import (
    currency_aliases,
    currency_code,
    currency_pair,
    iso_codes,
)
from external_query_service.text._targets import normalize_for_match


def test_us_dollar_goes_by_its_code_chinese_and_english_names_and_its_own_symbol() -> None:
    aliases = currency_aliases("USD")
    assert aliases[0] == "USD"
    assert {"美元", "US$", "US Dollar", "US dollars"} <= set(aliases)


def test_a_lower_case_code_has_the_same_aliases() -> None:
    assert currency_aliases("usd") == currency_aliases("USD")


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("人民币", "CNY"),
        ("人民幣", "CNY"),
        ("CN¥", "CNY"),
        ("Chinese Yuan", "CNY"),
        ("美元", "USD"),
        ("US$", "USD"),
        ("us dollars", "USD"),
        ("ＵＳＤ", "USD"),
        ("港幣", "HKD"),
        ("€", "EUR"),
    ],
)
def test_a_name_symbol_or_code_gives_its_currency(name: str, code: str) -> None:
    assert currency_code(name) == code


@pytest.mark.parametrize("symbol", ["¥", "￥", "$"])
def test_a_symbol_several_currencies_use_names_none(symbol: str) -> None:
    assert currency_code(symbol) is None
    assert symbol not in currency_aliases("CNY") + currency_aliases("JPY")
    assert symbol not in currency_aliases("USD") + currency_aliases("TWD")


@pytest.mark.parametrize("name", ["RMB", "天气", "", "XYZ"])
def test_names_outside_cldr_give_no_currency(name: str) -> None:
    # RMB is a common abbreviation, but CLDR does not list it and it is not added by hand.
    assert currency_code(name) is None


def test_every_alias_leads_back_to_its_currency() -> None:
    for code in ("USD", "CNY", "HKD", "JPY", "EUR", "GBP", "TWD"):
        assert {currency_code(alias) for alias in currency_aliases(code)} == {code}


def test_aliases_are_distinct_after_normalization() -> None:
    keys = [normalize_for_match(alias) for alias in currency_aliases("CNY")]
    assert len(keys) == len(set(keys))


def test_an_unknown_code_goes_only_by_itself() -> None:
    assert currency_aliases("xyz") == ("XYZ",)


def test_cldr_codes_include_current_currencies_but_not_look_alike_words() -> None:
    codes = iso_codes()
    assert {"USD", "CNY", "HKD", "EUR"} <= codes
    assert "GDP" not in codes


def test_the_pair_is_the_first_two_known_codes_base_first() -> None:
    assert currency_pair(("GDP", "usd", "cny")) == ("GDP", "USD")
    assert currency_pair(("GDP", "usd", "cny"), iso_codes()) == ("USD", "CNY")
    assert currency_pair(("美元", "人民币")) is None
