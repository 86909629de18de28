"""How often does a page's top snippet open with navigation? Real pages from a corpus.

    python bench/snippet_lead.py [CORPUS_DIR]

CORPUS_DIR defaults to $EQS_CORPUS (the folder holding ``INDEX.json``); with neither, the
script says so and measures nothing. Every page goes through ``analyse_page`` with its title as
the query (as ``bench/page_cpu.py`` does). A top snippet *opens with link text* when its first
line is the text of one of the page's links (``<a>…</a>`` without inner markup, whitespace
collapsed) or a trail of three or more items joined by ``>``, ``»`` or ``|``. The judge is
this script's own, so the same script measures any version of the package (run it with
``PYTHONPATH`` pointing at another checkout for a before/after).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from external_query_service.errors import ExternalQueryError
from external_query_service.text._analyse import analyse_page

_ANCHOR = re.compile(r"<a\b[^>]{0,2000}>([^<]{1,80})</a>", re.IGNORECASE)
_SEPARATORS = re.compile(r"[>»|]")


def opens_with_link_text(snippet: str, markup: str) -> bool:
    first = " ".join(snippet.split("\n", 1)[0].split())
    items = [item for item in _SEPARATORS.split(first) if item.strip(" -")]
    if len(items) >= 3:
        return True
    links = {" ".join(html.unescape(m[1]).split()) for m in _ANCHOR.finditer(markup)}
    return first in links


def main() -> int:
    named = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EQS_CORPUS")
    if not named or not (Path(named) / "INDEX.json").is_file():
        print("no corpus given (pass CORPUS_DIR or set EQS_CORPUS); nothing to do")
        return 0
    root = Path(named)
    rows = json.loads((root / "INDEX.json").read_text(encoding="utf-8"))
    pages = with_snippet = leading = 0
    for row in rows:
        title = row.get("title")
        if not title or title == "None":
            continue
        body = (root / row["html"]).read_bytes()
        pages += 1
        try:
            analysis = analyse_page(
                body, url=row["url"], declared_charset=None, content_type="text/html", query=title
            )
        except ExternalQueryError:
            continue
        if not analysis.snippets:
            continue
        with_snippet += 1
        markup = body.decode(analysis.encoding, errors="replace")
        leading += opens_with_link_text(analysis.snippets[0].chunk.text, markup)
    share = leading / max(with_snippet, 1)
    print(
        f"pages {pages}, with a top snippet {with_snippet}, top snippet opens with link text "
        f"{leading} ({share:.1%})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
