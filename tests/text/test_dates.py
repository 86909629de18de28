from __future__ import annotations

from datetime import date

import pytest

from external_query_service.text._dates import find_dates

MAY_14 = date(2025, 5, 14)


@pytest.mark.parametrize(
    "text",
    [
        "发布时间 2025-05-14 08:00",
        "2025/5/14",
        "2025.05.14",
        "2025年5月14日",
        "2025 年 05 月 14 号",
        "２０２５年５月１４日",
        "May 14, 2025",
        "may 14 2025",
        "Wednesday, 14 May 2025",
        "14th May, 2025",
        "2025-05-14T07:30:00+01:00",
    ],
)
def test_explicit_dates_in_every_supported_form_are_found(text: str) -> None:
    assert find_dates(text) == (MAY_14,)


def test_abbreviated_english_months_are_found() -> None:
    assert find_dates("Sept. 3, 2024 and 5 Jan 2025") == (date(2024, 9, 3), date(2025, 1, 5))


def test_invalid_calendar_dates_are_dropped() -> None:
    assert find_dates("2025-02-30, 2025年13月1日, February 29, 2025, 2024-02-29") == (
        date(2024, 2, 29),
    )


def test_dates_are_unique_in_order_of_appearance() -> None:
    text = "2025-05-16 then 2025年5月14日 then May 16, 2025 then 2025/05/14"
    assert find_dates(text) == (date(2025, 5, 16), MAY_14)


def test_limit_caps_the_number_of_dates() -> None:
    text = " ".join(f"2025-01-{day:02d}" for day in range(1, 20))
    assert len(find_dates(text)) == 8
    assert find_dates(text, limit=3) == (date(2025, 1, 1), date(2025, 1, 2), date(2025, 1, 3))
    assert find_dates(text, limit=0) == ()


def test_relative_and_partial_dates_are_not_dates() -> None:
    assert find_dates("今天、明天、昨天，today and tomorrow, 5月14日, May 2025, 2025年5月") == ()


def test_numbers_that_only_look_like_dates_are_ignored() -> None:
    assert find_dates("version 1.2025.05.14, phone 12025-05-140, year 1850-01-01") == ()


def test_a_date_range_yields_both_ends() -> None:
    assert find_dates("2025/05/14-2025/05/20") == (MAY_14, date(2025, 5, 20))


def test_chinese_month_day_without_year_needs_a_reference_date() -> None:
    text = "气象台11月30日发布：12月1日多云转阴"
    assert find_dates(text) == ()
    assert find_dates(text, reference=date(2026, 11, 30)) == (date(2026, 11, 30), date(2026, 12, 1))


def test_month_day_without_year_takes_the_year_closest_to_the_reference() -> None:
    assert find_dates("1月2日", reference=date(2026, 12, 30)) == (date(2027, 1, 2),)
    assert find_dates("12月28日", reference=date(2027, 1, 3)) == (date(2026, 12, 28),)
    assert find_dates("2月29日", reference=date(2025, 3, 1)) == (date(2024, 2, 29),)


def test_a_full_chinese_date_is_not_reread_as_a_month_day() -> None:
    assert find_dates("2025年5月14日", reference=date(2030, 1, 1)) == (MAY_14,)


def test_english_month_day_without_year_is_never_a_date() -> None:
    assert find_dates("you may 14 times; December 1", reference=date(2026, 11, 30)) == ()


@pytest.mark.parametrize(
    "adversarial",
    [
        "2025-" * 20_000,
        "May " * 25_000,
        "1" * 100_000,
        "2025年" * 20_000,
        "14 " * 33_000,
        "2025/05/1" * 11_000,
        "a" * 99_999 + "!",
        "12月" * 33_000,
        "1月1" * 33_000,
    ],
)
def test_adversarial_100k_strings_return_without_dates(adversarial: str) -> None:
    assert find_dates(adversarial) == ()
    assert find_dates(adversarial, reference=MAY_14) == ()
