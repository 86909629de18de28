"""Signed shared entries on a real Redis: a forged page body or page analysis is refused
and the page fetched (or analysed) again, planted entries are never found, keys rotate,
forged sessions and leases hold nothing, and an unsigned cache says so.

Every test uses a key prefix of its own (deleted afterwards, see ``prefix``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from external_query_service import ExternalQueryService, Settings
from external_query_service.cli import main
from external_query_service.errors import SettingsError
from external_query_service.net._cache import shared_key
from external_query_service.settings import CacheSettings
from external_query_service.storage._redis_cache import SharedCache
from external_query_service.testing import LoopbackServer, World
from tests.support.world import PORT_QUESTION, make_service, serve_port_news

KEY_ENV = "EQ_TEST_CACHE_KEY"
OLD_ENV = "EQ_TEST_CACHE_KEY_OLD"
GENUINE = "湛江港今年货物吞吐量预计突破3亿吨"
FORGED = "湛江港今年货物吞吐量为零，港口已永久关闭"
PAGE = "/throughput"


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    import redis

    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "first secret, long enough to be one")
    monkeypatch.setenv(OLD_ENV, "the secret being rotated out")


def cache(redis_url: str, prefix: str, **signing: Any) -> dict[str, Any]:
    return {"url": redis_url, "key_prefix": prefix, **signing}


def answer(world: World, cache_section: dict[str, Any]) -> tuple[str, int]:
    """The answer text of a fresh service, and how many services' entries it refused."""
    with make_service(world, world.searxng(), cache=cache_section) as service:
        found = service.answer(PORT_QUESTION, {"entities": ["湛江港"]})
        assert found.status == "answered", found.text
        assert service.shared_cache is not None
        return found.text, service.shared_cache.link.rejected


def entries(client: Any, prefix: str, namespace: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{prefix}{namespace}:e:*", count=500))


def answered_once(
    loopback: LoopbackServer, redis_url: str, prefix: str
) -> tuple[World, dict[str, Any]]:
    """The port-news world answered once by a signed service; the world and its settings."""
    world = World(loopback)
    serve_port_news(world)
    signed = cache(redis_url, prefix, signing_key_env=KEY_ENV)
    text, _ = answer(world, signed)
    assert GENUINE in text
    return world, signed


def test_a_forged_page_body_is_refused_and_the_page_fetched_again(
    loopback: LoopbackServer, redis_url: str, prefix: str, client: Any, keys: None
) -> None:
    world, signed = answered_once(loopback, redis_url, prefix)
    assert len(world.requests_to(PAGE)) == 1
    forged = 0
    for key in entries(client, prefix, "http"):
        body = client.hget(key, "b")
        if GENUINE.encode() in body:
            client.hset(key, "b", body.replace(GENUINE.encode(), FORGED.encode()))
            forged += 1
    assert forged == 1

    text, rejected = answer(world, signed)
    assert FORGED not in text
    assert GENUINE in text
    assert rejected >= 1
    assert len(world.requests_to(PAGE)) == 2  # the world saw the page fetched again


def test_a_forged_page_analysis_is_refused_and_the_page_analysed_again(
    loopback: LoopbackServer, redis_url: str, prefix: str, client: Any, keys: None
) -> None:
    world, signed = answered_once(loopback, redis_url, prefix)
    forged = 0
    for key in entries(client, prefix, "analysis"):
        body = client.hget(key, "b")
        # The text as the analysis JSON spells it (escaped or not); the genuine raw_digest
        # stays, as a forger would keep it.
        for genuine, fake in ((GENUINE, FORGED), (json.dumps(GENUINE), json.dumps(FORGED))):
            if genuine.strip('"').encode() in body:
                forgery = body.replace(genuine.strip('"').encode(), fake.strip('"').encode())
                client.hset(key, "b", forgery)
                forged += 1
    assert forged >= 1

    text, rejected = answer(world, signed)
    assert FORGED not in text
    assert GENUINE in text
    assert rejected >= forged


def test_an_entry_planted_where_an_unsigned_cache_keeps_it_is_never_found(
    loopback: LoopbackServer, redis_url: str, prefix: str, client: Any, keys: None
) -> None:
    world = World(loopback)
    page = serve_port_news(world)
    # Planted by someone without the key, at the name an unsigned cache would use.
    planter = SharedCache(CacheSettings(url=redis_url, key_prefix=prefix, allow_unsigned=True))
    assert planter.responses.put(shared_key(("page", "GET", page)), b"{}", b"x", ttl_s=60)
    planter.close()
    answer(world, cache(redis_url, prefix, signing_key_env=KEY_ENV))

    assert len(world.requests_to(PAGE)) == 1  # fetched, not read from the plant
    names = {key.decode().rsplit(":", 1)[1] for key in entries(client, prefix, "http")}
    assert shared_key(("page", "GET", page)) in names  # the plant is still there, unused
    assert len(names) >= 3  # the search and the page, under names nobody could precompute


def test_a_rotated_key_still_reads_what_the_previous_one_signed(
    loopback: LoopbackServer,
    redis_url: str,
    prefix: str,
    keys: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EQ_TEST_UNRELATED_KEY", "a third secret, unrelated to both")
    world = World(loopback)
    serve_port_news(world)
    answer(world, cache(redis_url, prefix, signing_key_env=OLD_ENV))
    assert len(world.requests_to(PAGE)) == 1
    rotated = cache(redis_url, prefix, signing_key_env=KEY_ENV, signing_key_previous_env=OLD_ENV)
    _, rejected = answer(world, rotated)
    assert (len(world.requests_to(PAGE)), rejected) == (1, 0)  # read, and trusted
    answer(world, cache(redis_url, prefix, signing_key_env="EQ_TEST_UNRELATED_KEY"))
    # A service with neither key finds nothing it can use (it reads under other names).


def test_forged_sessions_and_leases_hold_nothing(
    redis_url: str, prefix: str, client: Any, keys: None
) -> None:
    shared = SharedCache(CacheSettings(url=redis_url, key_prefix=prefix, signing_key_env=KEY_ENV))
    try:
        assert shared.values.set("session-1", b'{"turns": 1}', 60)
        assert shared.values.get("session-1", 60) == b'{"turns": 1}'
        [stored] = client.scan_iter(match=f"{prefix}value:*")
        client.set(stored, client.get(stored).replace(b"1", b"9"))
        assert shared.values.get("session-1", 60) is None
        assert not client.exists(stored)  # dropped

        token = shared.responses.claim("job", 30)
        assert token
        assert shared.responses.claimed("job")
        [lease] = client.scan_iter(match=f"{prefix}http:l:*")
        client.set(lease, "planted")
        assert not shared.responses.claimed("job")  # a planted lease stalls nobody
        assert shared.link.rejected == 2
    finally:
        shared.close()


def test_an_unsigned_cache_says_so_at_start_and_in_readiness(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    settings = Settings.model_validate({"cache": cache(redis_url, prefix, allow_unsigned=True)})
    with ExternalQueryService(settings) as service:
        ready = asyncio.run(service.aprobe_backends())
    assert ready["cache"].model_dump() == {"ready": True, "reason": "unsigned"}
    assert [r for r in caplog.records if "not signed" in r.getMessage()]


@pytest.mark.parametrize(
    ("signing", "says"),
    [
        ({}, "without a signing key"),
        ({"require_signing": True}, "without a signing key"),
        ({"require_signing": True, "allow_unsigned": True}, "without a signing key"),
        ({"signing_key_env": KEY_ENV}, f"${KEY_ENV} is empty or unset"),
        ({"signing_key_env": KEY_ENV, "allow_unsigned": True}, f"${KEY_ENV} is empty or unset"),
    ],
)
def test_a_shared_cache_without_a_key_is_refused_when_the_service_is_built(
    redis_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    signing: dict[str, Any],
    says: str,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    settings = Settings.model_validate({"cache": cache(redis_url, prefix, **signing)})

    with pytest.raises(SettingsError, match=re.escape(says)):
        ExternalQueryService(settings)


def test_a_named_signing_key_that_is_unset_exits_2_in_one_line(
    redis_url: str,
    prefix: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = tmp_path / "eq.toml"
    config.write_text(
        f'[cache]\nurl = "{redis_url}"\nkey_prefix = "{prefix}"\nsigning_key_env = "{KEY_ENV}"\n',
        encoding="utf-8",
    )
    (tmp_path / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    code = main(["ask", "What is new?", "--config", str(config), "--docs", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"signing_key_env: ${KEY_ENV} is empty or unset" in err
    assert len(err.strip().splitlines()) == 1
