"""The bundled ``method:public-github`` evidence provider.

Anonymous, bounded GETs only — no token, cookie, proxy credential or redirect — of files
named by ``https://github.com/OWNER/REPO/blob/<40-hex commit>/PATH`` (branch and tag URLs
and other hosts are refused at planning, before any request). Repository visibility is
checked through the API when planning and again before every read; a file must be UTF-8
text; the finding is the literal matches of the search terms. Only GitHub's answer can
make a repository "not public" (404, or ``private``); no answer at all (DNS, refused
connection, timeout) is ``github_unreachable``, another status ``visibility_unknown``. A
failed source's limitation names the step it reached and the HTTP status (or that the
network gave no answer), never a response body or an exception text. Partial successes
are kept. ``accessed_at`` is taken after each read,
``completed_at`` after all of them.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import unquote

import httpx

from .._clock import Clock
from .._digests import sha256_digest
from ..admission._models import PROTOCOL, EvidencePlan, EvidenceReceipt, ProviderRow, parse_model
from ..admission._plan import build_plan, build_request, verify_plan
from ..admission._projection import compact
from ..errors import ContractRejected, FetchError, UpstreamStatus
from ..net._fetch import TrustedEndpoint, check_url
from ..net._policy import Resolver
from ..settings import GitHubSettings, NetworkSettings

__all__ = [
    "BASIS",
    "ENV_API_URL",
    "ENV_RAW_URL",
    "MAX_SOURCES",
    "MAX_TERMS",
    "PROVIDER_ID",
    "SOURCE_FAMILY",
    "GitHubEndpoints",
    "GitHubSource",
    "PublicGitHub",
    "Visibility",
    "github_endpoints",
    "parse_source_url",
    "provider_row",
]

PROVIDER_ID: Final = "method:public-github"
ENV_API_URL: Final = "EXTERNAL_QUERY_GITHUB_API_URL"
ENV_RAW_URL: Final = "EXTERNAL_QUERY_GITHUB_RAW_URL"
SOURCE_FAMILY = "github-repository-file"
BASIS = "literal_match"
MAX_SOURCES = 20
MAX_TERMS = 20

_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_REPO = re.compile(r"[A-Za-z0-9._-]{1,100}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_PATH_SEGMENT = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%-]+")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")

Step = Literal["repository visibility check", "source file read", "source text validation"]


@dataclass(frozen=True, slots=True)
class GitHubSource:
    """A file of a public repository pinned to a commit (``blob`` URL, parsed)."""

    url: str
    owner: str
    repo: str
    commit: str
    path: str

    @property
    def repository(self) -> str:
        """``owner/repo``."""
        return f"{self.owner}/{self.repo}"


def _safe_segment(segment: str) -> bool:
    """A path segment that means the same to every server: allowed characters, well-formed
    escapes, and once decoded neither a dot segment nor a slash, backslash or control
    character (``%2e%2e`` would let the read leave the repository whose visibility was
    checked)."""
    if not _PATH_SEGMENT.fullmatch(segment) or _BAD_ESCAPE.search(segment):
        return False
    decoded = unquote(segment)
    return decoded not in (".", "..") and not any(
        char in "/\\" or ord(char) < 0x20 or ord(char) == 0x7F for char in decoded
    )


def _refuse(url: str, why: str) -> ContractRejected:
    return ContractRejected("unsupported_source_url", f"{compact(url, 300)}: {why}")


def parse_source_url(url: str) -> GitHubSource:
    """Accept only ``https://github.com/OWNER/REPO/blob/<40 hex>/PATH``; anything else is
    ``ContractRejected('unsupported_source_url')`` naming why."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise _refuse(url, "not a URL") from None
    if parsed.scheme != "https":
        raise _refuse(url, "only https URLs")
    if parsed.userinfo or parsed.port is not None or parsed.host != "github.com":
        raise _refuse(url, "only https://github.com/ file URLs")
    if parsed.query or parsed.fragment:
        raise _refuse(url, "no query or fragment")
    raw_path = parsed.raw_path.decode("ascii")
    if url != f"https://github.com{raw_path}":
        # The URL parser normalizes (dot segments, case, default port); accept only a URL
        # that is already in that form, so the source_ref is exactly what is read.
        raise _refuse(url, "not in normal form (dot segments, case or port)")
    parts = raw_path.split("/")
    if len(parts) < 6 or parts[0] != "" or parts[3] != "blob":
        raise _refuse(url, "expected /OWNER/REPO/blob/COMMIT/PATH")
    owner, repo, commit, path_parts = parts[1], parts[2], parts[4], parts[5:]
    if not _OWNER.fullmatch(owner) or not _REPO.fullmatch(repo) or repo in (".", ".."):
        raise _refuse(url, "not an owner/repository name")
    if not _COMMIT.fullmatch(commit):
        raise _refuse(url, "the revision must be a full 40-hex commit (no branch or tag)")
    if not all(_safe_segment(segment) for segment in path_parts):
        raise _refuse(url, "the file path has an empty, dot or unsafe segment")
    return GitHubSource(url=url, owner=owner, repo=repo, commit=commit, path="/".join(path_parts))


# -- endpoints -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GitHubEndpoints:
    """The GitHub API and raw-content base URLs this method reads from."""

    api_url: str
    raw_url: str


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _endpoint(url: str, name: str) -> str:
    try:
        # The fetcher's own URL gate: http(s), a plain host, no credentials in the URL.
        parsed = check_url(url)
    except FetchError:
        raise ContractRejected(
            "insecure_endpoint", f"{name} must be a plain http(s) base URL without credentials"
        ) from None
    if parsed.query or parsed.fragment:
        # Nothing rides along in a query either (no access_token=…): anonymous reads only.
        raise ContractRejected("insecure_endpoint", f"{name} must be a base URL without query")
    if parsed.scheme == "https" or (parsed.scheme == "http" and _loopback(parsed.host)):
        return url.rstrip("/")
    raise ContractRejected("insecure_endpoint", f"{name} must be https (http only on loopback)")


def github_endpoints(settings: GitHubSettings, env: Mapping[str, str]) -> GitHubEndpoints:
    """Settings, overridden by ``EXTERNAL_QUERY_GITHUB_API_URL`` / ``..._RAW_URL``."""
    api = env.get(ENV_API_URL, "").strip() or settings.api_url
    raw = env.get(ENV_RAW_URL, "").strip() or settings.raw_url
    return GitHubEndpoints(api_url=_endpoint(api, "api_url"), raw_url=_endpoint(raw, "raw_url"))


def provider_row(*, ready: bool, reason: str | None = None) -> ProviderRow:
    """The method's inventory row; ``ready`` only after a real visibility probe."""
    return ProviderRow(
        provider_id=PROVIDER_ID,
        provider_kind="method",
        protocol=PROTOCOL,
        declared=True,
        installed=True,
        enabled=True,
        ready=ready,
        unavailable_reason=None if ready else (reason or "not_probed"),
        observed_by="probe" if ready else "registry",
    )


# -- the method ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Visibility:
    """What GitHub said about a repository's visibility; ``refusal()`` is the rejection to
    raise when it is not public."""

    repository: str
    public: bool
    #: The HTTP status of the API answer; None when the network gave no answer.
    status: int | None
    detail: str
    #: Why not public: ``repository_not_public`` only when GitHub said so (404 — private
    #: and missing look the same — or ``private``), ``github_unreachable`` when nothing
    #: answered, ``visibility_unknown`` for any other answer. None when public.
    reason: str | None = None

    def refusal(self) -> ContractRejected:
        """The ``ContractRejected`` naming why the repository cannot be used."""
        where = f"{self.repository}: visibility check {self.detail}"
        return ContractRejected(self.reason or "repository_not_public", where)


#: No answer at all: the network, not the repository, and which way it failed.
_NO_ANSWER = {
    "resolve_failed": "host name not resolved",
    "connect_failed": "connection failed",
    "deadline_exceeded": "timed out",
    "blocked_destination": "address outside the network policy",
}


def _status_text(exc: FetchError) -> tuple[int | None, str]:
    # HTTP statuses and the kind of network failure stay visible; bodies and exception
    # texts (which may quote the server) do not.
    if isinstance(exc, UpstreamStatus):
        return exc.status, f"HTTP {exc.status}"
    return None, f"not reached: {_NO_ANSWER.get(exc.reason, 'no answer')}; no HTTP status"


def _literal_findings(text: str, terms: Sequence[str]) -> str:
    lines = text.splitlines()
    parts = []
    for term in terms:
        count = text.count(term)
        if not count:
            parts.append(f"{json.dumps(term, ensure_ascii=False)}: no literal match")
            continue
        first = next(((i, line) for i, line in enumerate(lines, 1) if term in line), None)
        where = f"first at line {first[0]}: {compact(first[1], 160)}" if first else "across lines"
        parts.append(f"{json.dumps(term, ensure_ascii=False)}: {count} literal match(es), {where}")
    return "; ".join(parts)


class PublicGitHub:
    """Plans and executes ``method:public-github`` reads against ``endpoints``."""

    def __init__(
        self,
        endpoints: GitHubEndpoints,
        network: NetworkSettings,
        *,
        clock: Clock,
        resolver: Resolver | None = None,
    ) -> None:
        self.endpoints = endpoints
        self._network = network
        self._clock = clock
        self._api = TrustedEndpoint(endpoints.api_url, network, resolver=resolver)
        self._raw = TrustedEndpoint(endpoints.raw_url, network, resolver=resolver)

    async def aclose(self) -> None:
        """Close the API and raw-content endpoints."""
        await self._api.aclose()
        await self._raw.aclose()

    def _envelope(self, sources: Sequence[GitHubSource], terms: Sequence[str]) -> dict[str, Any]:
        return {
            "method": "public-github",
            "sources": [source.url for source in sources],
            "search_terms": list(terms),
            "api_url": self.endpoints.api_url,
            "raw_url": self.endpoints.raw_url,
            "anonymous": True,
            "redirects": "refused",
            "max_bytes": self._network.max_page_bytes,
            "timeout_ms": round(self._network.timeout_s * 1000),
        }

    async def visibility(self, source: GitHubSource) -> Visibility:
        """A real, bounded probe: the repository must be public right now."""
        try:
            answer = await self._api.get_bytes(f"repos/{source.owner}/{source.repo}")
        except FetchError as exc:
            status, text = _status_text(exc)
            if status is None:
                reason = "github_unreachable"
            elif status == 404:
                reason = "repository_not_public"
            else:
                reason = "visibility_unknown"
            return Visibility(source.repository, False, status, text, reason)
        try:
            data = json.loads(answer.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            unreadable = f"HTTP {answer.status}, unreadable"
            return Visibility(
                source.repository, False, answer.status, unreadable, "visibility_unknown"
            )
        public = (
            isinstance(data, dict)
            and data.get("private") is False
            and data.get("visibility", "public") == "public"
        )
        if public:
            return Visibility(source.repository, True, answer.status, f"HTTP {answer.status}")
        detail = f"HTTP {answer.status}, repository not public"
        return Visibility(source.repository, False, answer.status, detail, "repository_not_public")

    async def plan(
        self,
        *,
        objective: str,
        user_activity: str,
        decision: str,
        evidence_kinds: Sequence[str],
        sources: Sequence[str],
        search_terms: Sequence[str],
    ) -> EvidencePlan:
        """Refuse unsupported URLs before any request, probe every repository's
        visibility, then bind the request to this method. Rejections:
        ``unsupported_source_url``, ``missing_source``, ``missing_search_term``,
        ``repository_not_public`` (GitHub says so), ``github_unreachable`` (no answer:
        DNS, connection, timeout), ``visibility_unknown`` (another status) and the plan's
        own."""
        request = build_request(objective, user_activity, decision, evidence_kinds)
        parsed = [parse_source_url(url) for url in dict.fromkeys(sources)]
        terms = list(dict.fromkeys(term for term in search_terms if term.strip()))
        if not parsed:
            raise ContractRejected("missing_source", "name at least one --source")
        if not terms:
            raise ContractRejected("missing_search_term", "name at least one --search-term")
        if len(parsed) > MAX_SOURCES or len(terms) > MAX_TERMS:
            raise ContractRejected(
                "too_many_reads", f"at most {MAX_SOURCES} sources and {MAX_TERMS} terms"
            )
        for repository in dict.fromkeys(source.repository for source in parsed):
            first = next(source for source in parsed if source.repository == repository)
            seen = await self.visibility(first)
            if not seen.public:
                raise seen.refusal()
        return build_plan(
            request,
            [provider_row(ready=True)],
            preferred_provider_id=PROVIDER_ID,
            envelope=self._envelope(parsed, terms),
        )

    def _sources_of(self, plan: EvidencePlan) -> tuple[list[GitHubSource], list[str]]:
        envelope = plan.envelope
        if plan.selected_provider.provider_id != PROVIDER_ID:
            raise ContractRejected(
                "provider_not_executable",
                f"execute runs only {PROVIDER_ID}, the plan selected "
                f"{plan.selected_provider.provider_id}",
            )
        if (envelope.get("api_url"), envelope.get("raw_url")) != (
            self.endpoints.api_url,
            self.endpoints.raw_url,
        ):
            raise ContractRejected("endpoint_mismatch", "the plan was made for other endpoints")
        urls, terms = envelope.get("sources"), envelope.get("search_terms")
        if not isinstance(urls, list) or not isinstance(terms, list) or not urls or not terms:
            raise ContractRejected("invalid_plan", "the envelope lacks sources or search terms")
        return [parse_source_url(str(url)) for url in urls], [str(term) for term in terms]

    async def execute(self, plan: Mapping[str, Any] | EvidencePlan) -> EvidenceReceipt:
        """Read every planned source (visibility again, file, UTF-8 text) and return the
        receipt: ``succeeded`` with the sources read, or ``failed`` when none was."""
        checked = verify_plan(plan)
        sources, terms = self._sources_of(checked)
        read: list[dict[str, Any]] = []
        failures: list[str] = []
        for source in sources:
            outcome = await self._read(source, terms)
            if isinstance(outcome, str):
                failures.append(outcome)
            else:
                read.append(outcome)
        completed_at = self._clock().isoformat()
        limitations = [
            *failures,
            "Literal matches prove neither a semantic conclusion nor evidence completeness.",
            "Receipt written by the bundled method; it is not provider execution attestation.",
        ]
        data = {
            "schema_version": "external_evidence_receipt_v0",
            "plan_id": checked.plan_id,
            "request_id": checked.request.request_id,
            "provider_id": PROVIDER_ID,
            "provider_kind": "method",
            "status": "succeeded" if read else "failed",
            "sources": read,
            "summary": f"{len(read)} of {len(sources)} source file(s) read; "
            f"{len(terms)} search term(s)",
            "limitations": limitations,
            "completed_at": completed_at,
        }
        return parse_model(EvidenceReceipt, data, "invalid_receipt")

    async def _read(self, source: GitHubSource, terms: Sequence[str]) -> dict[str, Any] | str:
        """One source's receipt entry, or the limitation naming the step that failed."""

        def failed(step: Step, detail: str) -> str:
            return f"{source.url}: not read; stopped at {step} ({detail})"

        seen = await self.visibility(source)
        if not seen.public:
            return failed("repository visibility check", seen.detail)
        try:
            answer = await self._raw.get_bytes(
                f"{source.owner}/{source.repo}/{source.commit}/{source.path}"
            )
        except FetchError as exc:
            return failed("source file read", _status_text(exc)[1])
        accessed_at = self._clock().isoformat()
        try:
            text = answer.body.decode("utf-8")
        except UnicodeDecodeError:
            return failed("source text validation", f"HTTP {answer.status}, not UTF-8 text")
        if "\x00" in text:
            return failed("source text validation", f"HTTP {answer.status}, binary content")
        return {
            "source_ref": source.url,
            "source_family": SOURCE_FAMILY,
            "basis": BASIS,
            "finding": _literal_findings(text, terms),
            "limitation": (
                f"Literal matches in this one file at commit {source.commit[:12]} only; other "
                "files, history, rendered pages and linked content were not inspected."
            ),
            "publication_date": None,
            "accessed_at": accessed_at,
            "content_digest": sha256_digest(answer.body),
        }
