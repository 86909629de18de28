"""The answer's Markdown as plain text, for a terminal: what a reader would see rendered.

The presenter writes CommonMark in which every bit of outside text renders as exactly that
text: punctuation backslash-escaped, ``&``, ``<`` and ``>`` as character references, kept
links as ``[label](<url>)``, web links as autolinks, other URLs as code spans. A terminal
renders none of it, so ``\\*\\*`` and ``allowed\\_networks`` would show as written. This
undoes exactly those constructs and nothing else (``--format markdown`` keeps them).
"""

from __future__ import annotations

import re

__all__ = ["plain_text"]

_MARKUP = re.compile(
    r"\[(?P<label>(?:\\.|[^\]\\])*)\]\(<(?P<url>[^>]*)>\)"  # a kept link
    r"|<(?P<auto>https?://[^>\s]+)>"  # an autolink
    r"|`(?P<code>[^`]*)`"  # a code span
    r"|\\(?P<escaped>[\\`*_\[\]()!|~#+\-.>{}])"  # a backslash escape
    r"|&(?P<entity>amp|lt|gt|quot);"  # a character reference
)
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"'}


def plain_text(markdown: str) -> str:
    """``markdown`` (an answer's text) as the plain text it renders to."""

    def plain(match: re.Match[str]) -> str:
        if match["label"] is not None:
            label = plain_text(match["label"])
            return label if label == match["url"] else f"{label} ({match['url']})"
        if match["entity"] is not None:
            return _ENTITIES[match["entity"]]
        return match["auto"] or match["code"] or match["escaped"] or ""

    return _MARKUP.sub(plain, markdown)
