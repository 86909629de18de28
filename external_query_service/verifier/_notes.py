"""Notes for the reader about admitted evidence, in the answer's language.

The checks say *what* is uncertain (a ``ReaderNote``); this module says it in words. The
notes travel in the packet and the answer as sentences (``uncertainties``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

from ..text._language import AnswerLanguage

__all__ = ["ReaderNote", "render_note"]


@dataclass(frozen=True, slots=True)
class ReaderNote:
    """``undated``: no publication date; ``snippet_only``: only the search snippet was read;
    ``carried_forward``: no figure for the date asked, so the latest one (``day``) stands;
    ``provider_text``: the page text is the search provider's extraction, not read here;
    ``conflicting_values``: admitted sources disagree on the value asked."""

    kind: Literal[
        "undated", "snippet_only", "carried_forward", "provider_text", "conflicting_values"
    ]
    day: date | None = None


_WORDS: dict[AnswerLanguage, dict[str, str]] = {
    "zh": {
        "undated": "部分来源未标注发布日期",
        "snippet_only": "部分来源未能读取正文，仅依据搜索摘要",
        "carried_forward": "所查日期没有新数据，该数值为 {day} 的最近一次数据",
        "provider_text": "部分来源的正文由搜索服务商提取，未经本服务直接读取",
        "conflicting_values": "来源之间对所问数值的说法不一致",
    },
    "en": {
        "undated": "some sources give no publication date",
        "snippet_only": "some sources could not be read in full; this rests on search snippets",
        "carried_forward": "no new figure for the date asked; this is the latest, of {day}",
        "provider_text": "some page text is the search provider's extraction, not read here",
        "conflicting_values": "the sources disagree on the value asked",
    },
}


def render_note(note: ReaderNote, language: AnswerLanguage) -> str:
    """``note`` as one sentence in ``language``."""
    day = note.day.isoformat() if note.day else ""
    return _WORDS[language][note.kind].format(day=day)
