"""What ``ask`` says beyond the answer when its sources were never really asked: a search
service that cannot be reached where the settings point (a refused connection, a 404), and
result pages whose text, as fetched, may be written by their scripts.

Both read only the answer (its attempts and their audit) and the settings, so they cost
nothing and never change the answer itself.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..models import ExternalAnswer
from ..settings import Settings

__all__ = ["EXIT_UNREACHABLE", "script_page_hint", "unreachable_sources"]

#: ``ask``'s exit code when every source tried refused the connection or answered 404.
EXIT_UNREACHABLE = 3
#: Attempt reasons that say the settings point at nothing: no server on that port, or
#: nothing served at that path.
_UNREACHED = {
    "connect_failed": "refused the connection (is the service running, on that port?)",
    "upstream_status_404": "answered 404: nothing is served at that path",
}
#: Page failures a rendering may cure (``browser.FALLBACK_REASONS``, as the page walk
#: records them).
_SCRIPT_WRITTEN = ("not_a_document:no_main_text", "not_a_document:too_short")


def unreachable_sources(answer: ExternalAnswer, settings: Settings) -> list[str]:
    """One line per source tried, naming its URL, when every source tried failed because
    nothing answers where the settings point; else none."""
    tried = [attempt for attempt in answer.attempts if attempt.status != "skipped"]
    if answer.status == "answered" or not tried:
        return []
    if any(attempt.status != "failed" or attempt.reason not in _UNREACHED for attempt in tried):
        return []
    urls = {adapter.id: getattr(adapter, "base_url", None) for adapter in settings.adapters}
    lines = []
    for attempt in tried:
        url = urls.get(attempt.adapter_id) or attempt.source or "?"
        why = _UNREACHED[attempt.reason or ""]
        lines.append(f"{attempt.adapter_id}: {url} {why}; check its base_url in the settings")
    return lines


def script_page_hint(answer: ExternalAnswer, settings: Settings) -> list[str]:
    """A line naming the result pages that gave no text as fetched, when the browser is off
    and the question went unanswered: such a page's text may be written by its scripts."""
    if answer.status == "answered" or settings.browser.mode != "off":
        return []
    hosts: dict[str, None] = {}
    for event in answer.audit.named("attempt"):
        failures = event.detail.get("page_failures")
        for item in failures if isinstance(failures, list) else ():
            url, _, why = str(item).rpartition(" ")
            if why in _SCRIPT_WRITTEN:
                hosts[urlsplit(url).netloc or url] = None
    if not hosts:
        return []
    return [
        f"result pages gave no readable text as fetched ({', '.join(hosts)}); if their "
        'scripts write it, [browser] mode = "fallback" reads them (the [browser] extra '
        "and Chromium)"
    ]
