"""``POST /v1/verify`` and ``"bundle": true`` on ``/v1/answer``, over real HTTP: uvicorn on
127.0.0.1 on a thread, a loopback world behind it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from external_query_service.testing import LoopbackServer, World, hit
from tests.support.bundles import AIRSHOW_QUESTION, airshow_page
from tests.support.world import make_service

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from external_query_service.server import ServerThread


@pytest.fixture
def world(loopback: LoopbackServer) -> World:
    url = World(loopback)
    page = url.page("news-a.test", "/airshow", airshow_page())
    url.results(AIRSHOW_QUESTION, [hit(page, "珠海航展", "新机型亮相", "2026-11-12")])
    return url


@pytest.fixture
def client(world: World) -> Iterator[httpx.Client]:
    service = make_service(world, world.searxng(), analysis={"processes": 0})
    with ServerThread(service) as server, httpx.Client(base_url=server.url, timeout=30) as opened:
        yield opened


def _bundle(client: httpx.Client) -> dict[str, Any]:
    reply = client.post("/v1/answer", json={"question": AIRSHOW_QUESTION, "bundle": True})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "answered"
    bundle: dict[str, Any] = body["bundle"]
    return bundle


def test_an_answer_asked_with_bundle_true_carries_its_bundle_and_without_it_none(
    client: httpx.Client,
) -> None:
    bundle = _bundle(client)
    plain = client.post("/v1/answer", json={"question": AIRSHOW_QUESTION}).json()

    assert bundle["schema_version"] == "external_query_bundle_v1"
    assert bundle["admission"]["plan_ids"] == plain["admission"]["plan_ids"]
    assert "bundle" not in plain


def test_verify_answers_holds_offline_and_with_refetch(client: httpx.Client) -> None:
    bundle = _bundle(client)

    offline = client.post("/v1/verify", json={"bundle": bundle})
    again = client.post("/v1/verify", json={"bundle": bundle, "refetch": True})

    assert offline.status_code == 200, offline.text
    assert (offline.json()["verdict"], offline.json()["refetched"]) == ("holds", False)
    assert again.json()["verdict"] == "holds"
    assert [source["verdict"] for source in again.json()["sources"]] == ["holds"]


def test_verify_takes_the_bundle_as_json_text_too(client: httpx.Client) -> None:
    import json

    bundle = _bundle(client)
    text = json.dumps(bundle, ensure_ascii=False)

    assert client.post("/v1/verify", json={"bundle": text}).json()["verdict"] == "holds"


def test_an_edited_quote_is_tampered_and_a_changed_page_is_changed(
    client: httpx.Client, world: World
) -> None:
    bundle = _bundle(client)
    edited = copy.deepcopy(bundle)
    edited["sources"][0]["quote"] = edited["sources"][0]["quote"].replace("预警机", "直升机")

    tampered = client.post("/v1/verify", json={"bundle": edited}).json()
    world.page("news-a.test", "/airshow", "<html><body><p>本届航展的展期共六天。</p></body></html>")
    changed = client.post("/v1/verify", json={"bundle": bundle, "refetch": True}).json()

    assert [source["verdict"] for source in tampered["sources"]] == ["tampered"]
    assert tampered["verdict"] == "tampered"
    assert changed["verdict"] == "changed"
    assert changed["sources"][0]["closest"]


def test_a_body_that_is_not_a_bundle_is_422_invalid_bundle(client: httpx.Client) -> None:
    reply = client.post("/v1/verify", json={"bundle": {"schema_version": "other"}})

    assert reply.status_code == 422
    assert reply.json()["error"]["reason"] == "invalid_bundle"


def test_the_openapi_document_names_the_route_and_the_flag(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()

    assert "/v1/verify" in document["paths"]
    assert "bundle" in document["components"]["schemas"]["AnswerRequest"]["properties"]
    assert "bundle" in document["components"]["schemas"]["ServedAnswer"]["properties"]


def test_a_signing_variable_named_but_unset_stops_the_app_at_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from external_query_service import ExternalQueryService, Settings, SettingsError
    from external_query_service.server import create_app

    monkeypatch.delenv("EQ_TEST_UNSET_BUNDLE_KEY", raising=False)
    settings = Settings.from_mapping(
        {"bundle": {"signing_key_env": "EQ_TEST_UNSET_BUNDLE_KEY"}, "analysis": {"processes": 0}}
    )
    with ExternalQueryService(settings) as service, pytest.raises(SettingsError):
        create_app(service, close_service=False, warm_up=False)
