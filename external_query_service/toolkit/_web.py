"""Origin-bounded web tools: open an entry URL, list a captured page's links, follow an
observed link, read a section (a passage) of a captured page.

Every fetch goes through the chain's ``SafeFetcher`` (GET only, bounded bytes, a total
deadline, the network address policy on every hop) and, on top of it, every URL — the
entry, each followed link and each redirect hop — must lie inside the caller's
``allowed_origins``; an off-origin hop is refused before it is requested. A link can be
followed only after a captured page showed it. Page and byte budgets are counted here.
Captures go to the ``EvidenceStore`` as normalized text, the same text snippets point into.
The page source may instead be a browser (``PageSource``: ``browser._pages.BrowserPages``),
whose every request goes through the same fetcher and whose tab is held to the same origins.
A PDF is captured as its pages' text (``pdf_text``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from lxml import etree  # type: ignore[import-untyped]
from trafilatura.utils import load_html

from .._digests import sha256_digest
from .._evidence_store import EvidenceStore
from .._frozen import Frozen
from ..errors import (
    BoundaryRefused,
    BudgetExhausted,
    ExtractionFailed,
    FetchError,
    ToolkitError,
    UnsafeURL,
)
from ..net._fetch import FetchedPage, SafeFetcher
from ..settings import NetworkSettings
from ..text._analyse import PDF_MAX_PAGES
from ..text._decode import decode_body
from ..text._extract import extract_page, normalize_text
from ..text._pdf import extract_pdf, is_pdf
from ._links import observe_links
from ._origins import OriginSet

__all__ = [
    "ObservedLink",
    "PageSource",
    "Section",
    "WebBudget",
    "WebPage",
    "WebTools",
    "WebUsage",
]

TextBasis = Literal["main_text", "visible_text", "plain_text", "pdf_text"]
_PLAIN_TYPES = frozenset({"text/plain", "text/markdown"})
_INVISIBLE = ("script", "style", "noscript", "template", "head")


class WebPage(Frozen):
    """A captured page. ``ref`` names its normalized text in the store; ``digest`` is the
    sha256 of that text, ``raw_digest`` of the body bytes received."""

    ref: str
    url: str
    final_url: str
    redirects: tuple[str, ...]
    title: str
    length: int
    digest: str
    raw_digest: str
    text_basis: TextBasis
    passages: int
    links: int
    links_outside_origins: int
    links_unsupported: int
    links_over_limit: int


class ObservedLink(Frozen):
    """A link a captured page showed (inside the origins). ``link_id`` is ``L<n>`` in the
    order links were first seen; ``captured_ref`` is set once it was followed."""

    link_id: str
    url: str
    text: str
    seen_on: str
    captured_ref: str | None = None


class Section(Frozen):
    """One passage of a captured page: ``text == store.quote(ref, offset, length)``."""

    passage_id: str
    ref: str
    source: str
    offset: int
    length: int
    text: str


@dataclass(frozen=True)
class WebBudget:
    """How many pages and bytes one ``WebTools`` may fetch."""

    max_pages: int = 10
    max_bytes: int = 5_000_000


class WebUsage(Frozen):
    """Pages and bytes fetched so far, against the budget."""

    pages: int
    bytes: int
    max_pages: int
    max_bytes: int


@dataclass(frozen=True)
class _Text:
    text: str
    title: str
    basis: TextBasis
    html: str | None


def _visible_text(html: str) -> str:
    """All text a reader would see, for pages whose main text is too short (link hubs)."""
    try:
        tree = load_html(html)
    except Exception:
        return ""
    if tree is None:
        return ""
    etree.strip_elements(tree, *_INVISIBLE, with_tail=False)
    return normalize_text("\n".join(str(part) for part in tree.itertext()))


def _page_text(page: FetchedPage) -> _Text:
    if is_pdf(page.content_type):
        # Every page's text (the same bound as a body's bytes), pages one after another.
        limit = len(page.body) or 1
        try:
            read = extract_pdf(page.body, page.final_url, max_pages=PDF_MAX_PAGES, max_chars=limit)
        except ExtractionFailed:
            return _Text("", "", "pdf_text", None)
        return _Text("\n".join(text for text in read.pages if text), read.title, "pdf_text", None)
    decoded = decode_body(page.body, page.charset, content_type=page.content_type)
    if page.content_type in _PLAIN_TYPES:
        return _Text(normalize_text(decoded.text), "", "plain_text", None)
    try:
        extracted = extract_page(decoded.text, page.final_url, content_type=page.content_type)
    except ExtractionFailed:
        return _Text(_visible_text(decoded.text), "", "visible_text", decoded.text)
    return _Text(extracted.text, extracted.title, "main_text", decoded.text)


class PageSource(Protocol):
    """Where the web tools get pages: the ``SafeFetcher``, or a browser
    (``browser._pages.BrowserPages``) that renders them."""

    async def fetch(
        self, url: str, *, allow_redirect: Callable[[str], bool] | None = None
    ) -> FetchedPage:
        """The page at ``url``; ``allow_redirect`` is asked about every other URL it leads
        to before that is requested (``UnsafeURL`` when it refuses); ``FetchError``."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds."""
        ...


class WebTools:
    """Web tools bounded to ``allowed_origins`` (see the module docstring).

    Refusals raise ``BoundaryRefused`` (reasons ``origin_not_allowed``,
    ``link_not_observed``, ``unknown_page``); a used-up budget ``BudgetExhausted``; a
    failed fetch ``ToolkitError`` with the fetcher's reason. Not safe for concurrent calls
    from several tasks: the session runs operations one at a time.
    """

    def __init__(
        self,
        fetcher: PageSource,
        store: EvidenceStore,
        allowed_origins: OriginSet | Iterable[str],
        *,
        budget: WebBudget | None = None,
    ) -> None:
        self._fetcher = fetcher
        self._store = store
        self.origins = (
            allowed_origins
            if isinstance(allowed_origins, OriginSet)
            else OriginSet(allowed_origins)
        )
        self.budget = budget or WebBudget()
        self._pages: dict[str, WebPage] = {}
        self._page_links: dict[str, tuple[str, ...]] = {}
        self._links: dict[str, ObservedLink] = {}
        self._link_by_url: dict[str, str] = {}
        self._fetches = 0
        self._bytes = 0
        self._owns_fetcher = False

    @classmethod
    def from_network(
        cls,
        network: NetworkSettings,
        store: EvidenceStore,
        allowed_origins: OriginSet | Iterable[str],
        *,
        budget: WebBudget | None = None,
    ) -> WebTools:
        """Web tools with their own ``SafeFetcher`` (closed by ``aclose``)."""
        return cls.owning(SafeFetcher(network), store, allowed_origins, budget=budget)

    @classmethod
    def owning(
        cls,
        source: PageSource,
        store: EvidenceStore,
        allowed_origins: OriginSet | Iterable[str],
        *,
        budget: WebBudget | None = None,
    ) -> WebTools:
        """Web tools over ``source`` (a fetcher or a browser), closed by ``aclose``."""
        tools = cls(source, store, allowed_origins, budget=budget)
        tools._owns_fetcher = True
        return tools

    # -- observation ----------------------------------------------------------------------
    @property
    def usage(self) -> WebUsage:
        """Pages and bytes fetched so far, against the budget."""
        return WebUsage(
            pages=self._fetches,
            bytes=self._bytes,
            max_pages=self.budget.max_pages,
            max_bytes=self.budget.max_bytes,
        )

    def pages(self) -> tuple[WebPage, ...]:
        """Captured pages, in capture order."""
        return tuple(self._pages.values())

    def page(self, ref: str) -> WebPage:
        """The page captured as ``ref``; ``BoundaryRefused`` (``unknown_page``) otherwise."""
        try:
            return self._pages[ref]
        except KeyError:
            raise BoundaryRefused(
                f"{ref} is not a page these web tools captured", reason="unknown_page"
            ) from None

    def links(self, ref: str) -> tuple[ObservedLink, ...]:
        """The links page ``ref`` showed, inside the origins, in page order."""
        self.page(ref)
        return tuple(self._links[link_id] for link_id in self._page_links[ref])

    def observed_links(self) -> tuple[ObservedLink, ...]:
        """Every link seen on a captured page, in the order first seen."""
        return tuple(self._links.values())

    def link(self, link: str) -> ObservedLink:
        """The observed link named by its id or exact URL; refused when never observed."""
        found = self._links.get(link) or self._links.get(self._link_by_url.get(link, ""))
        if found is None:
            raise BoundaryRefused(
                f"{link} was not observed on a captured page", reason="link_not_observed"
            )
        return found

    # -- actions --------------------------------------------------------------------------
    async def open(self, url: str) -> WebPage:
        """Capture the page at ``url`` (an entry point inside the origins)."""
        self._check_origin(url)
        return await self._capture(url)

    async def follow(self, link: str) -> WebPage:
        """Capture the page an observed link points to (``link`` is its id or URL)."""
        observed = self.link(link)
        page = await self._capture(observed.url)
        self._links[observed.link_id] = observed.model_copy(update={"captured_ref": page.ref})
        return page

    def read_section(self, passage_id: str) -> Section:
        """One passage of a captured page (see ``EvidenceStore.passage_options``)."""
        try:
            passage = self._store.passage(passage_id)
        except KeyError:
            raise BoundaryRefused(
                f"unknown passage {passage_id}", reason="unknown_passage"
            ) from None
        page = self.page(passage.ref)
        return Section(
            passage_id=passage.passage_id,
            ref=passage.ref,
            source=page.final_url,
            offset=passage.offset,
            length=passage.length,
            text=self._store.quote(passage.ref, passage.offset, passage.length),
        )

    async def aclose(self) -> None:
        """Close the fetcher, when these tools made it."""
        if self._owns_fetcher:
            await self._fetcher.aclose()

    # -- internals ------------------------------------------------------------------------
    def _check_origin(self, url: str) -> None:
        if not self.origins.allows(url):
            raise BoundaryRefused(
                f"{url} is outside the allowed origins ({', '.join(self.origins.as_strings())})",
                reason="origin_not_allowed",
            )

    def _check_budget(self) -> None:
        if self._fetches >= self.budget.max_pages:
            raise BudgetExhausted(
                f"page budget of {self.budget.max_pages} used up", reason="page_budget"
            )
        if self._bytes >= self.budget.max_bytes:
            raise BudgetExhausted(
                f"byte budget of {self.budget.max_bytes} used up", reason="byte_budget"
            )

    async def _capture(self, url: str) -> WebPage:
        self._check_budget()
        refused: list[str] = []

        def inside(hop: str) -> bool:
            if self.origins.allows(hop):
                return True
            refused.append(hop)
            return False

        self._fetches += 1
        try:
            fetched = await self._fetcher.fetch(url, allow_redirect=inside)
        except UnsafeURL as exc:
            if refused:
                raise BoundaryRefused(
                    f"{url} redirects to {refused[0]}, outside the allowed origins",
                    reason="origin_not_allowed",
                ) from None
            raise ToolkitError(str(exc), reason=exc.reason) from None
        except FetchError as exc:
            raise ToolkitError(str(exc), reason=exc.reason) from None
        self._bytes += len(fetched.body)
        # Hops were checked one by one; the final URL is checked again as a belt.
        self._check_origin(fetched.final_url)
        text = await asyncio.to_thread(_page_text, fetched)
        return self._remember(url, fetched, text)

    def _remember(self, url: str, fetched: FetchedPage, text: _Text) -> WebPage:
        metadata = {
            "kind": "web",
            "title": text.title,
            "content_type": fetched.content_type,
            "raw_digest": fetched.raw_digest,
            "text_basis": text.basis,
        }
        ref = self._store.put(text.text, source=fetched.final_url, metadata=metadata)
        found = (
            observe_links(text.html, fetched.final_url, self.origins)
            if text.html is not None
            else None
        )
        link_ids: list[str] = []
        for link_url, anchor in found.links if found else ():
            link_id = self._link_by_url.get(link_url)
            if link_id is None:
                link_id = f"L{len(self._links) + 1}"
                self._link_by_url[link_url] = link_id
                self._links[link_id] = ObservedLink(
                    link_id=link_id, url=link_url, text=anchor, seen_on=ref
                )
            link_ids.append(link_id)
        self._page_links[ref] = tuple(link_ids)
        page = WebPage(
            ref=ref,
            url=url,
            final_url=fetched.final_url,
            redirects=fetched.redirects,
            title=text.title,
            length=len(text.text),
            digest=sha256_digest(text.text),
            raw_digest=fetched.raw_digest,
            text_basis=text.basis,
            passages=len(self._store.passage_options(ref)),
            links=len(link_ids),
            links_outside_origins=found.outside_origins if found else 0,
            links_unsupported=found.unsupported if found else 0,
            links_over_limit=found.over_limit if found else 0,
        )
        self._pages[ref] = page
        return page
