"""Adapter options: each adapter's own keys sit in its ``[[adapters]]`` table and are typed
by the adapter's ``Options`` model, checked when the service builds it."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from external_query_service import (
    Adapter,
    AdapterOutcome,
    ExternalQueryService,
    Settings,
    SettingsError,
    register_adapter,
)
from external_query_service.adapters._open_meteo import OpenMeteoAdapter
from external_query_service.admission._canonical import content_id
from external_query_service.admission._chain import service_envelope
from external_query_service.gateway._registry import adapter_options
from external_query_service.models import ExternalQueryPlan, ProviderType


class CatalogAdapter(Adapter):
    """A third-party adapter with a folder option, a plain text option and a default."""

    kind: ClassVar[str] = "test_catalog"
    provider_type: ClassVar[ProviderType] = "doc_search"

    class Options(Adapter.Options):
        catalog: Path
        label: str = "catalog"
        limit: int = 3

    options: Options

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        return AdapterOutcome(status="empty", reason=self.options.label)


class Keyless(Adapter):
    """A third-party adapter that needs no options: the base ``Options`` takes no key."""

    kind: ClassVar[str] = "test_keyless"
    provider_type: ClassVar[ProviderType] = "live_search"

    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        return AdapterOutcome(status="empty")


@pytest.fixture(autouse=True)
def registered() -> None:
    register_adapter(CatalogAdapter.kind, CatalogAdapter, replace=True)
    register_adapter(Keyless.kind, Keyless, replace=True)


def build(toml: str) -> ExternalQueryService:
    return ExternalQueryService(Settings.from_toml(toml))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "kind = 'open_meteo'\ngeocodeing_url = 'https://geo.example/v1'",
            "adapter 'open_meteo' (open_meteo): unknown key 'geocodeing_url'",
        ),
        (
            "kind = 'searxng'\nid = 'searx'\ncolour = 'red'",
            "adapter 'searx' (searxng): unknown key 'colour'",
        ),
        # The free-form table of earlier versions: its keys now sit beside kind.
        (
            "kind = 'test_catalog'\ncatalog = '/srv'\noptions = { label = 'x' }",
            "adapter 'test_catalog' (test_catalog): unknown key 'options'",
        ),
        ("kind = 'test_keyless'\nbase_url = 'https://x.example'", "unknown key 'base_url'"),
        ("kind = 'test_catalog'", "adapter 'test_catalog' (test_catalog): missing key 'catalog'"),
        ("kind = 'test_catalog'\ncatalog = '/srv'\nlimit = 'many'", "limit: Input should be"),
        ("kind = 'frankfurter'\nbase_url = ''", "base_url: String should have at least 1"),
        ("kind = 'local_docs'", "adapter 'local_docs' (local_docs): missing key 'root'"),
    ],
)
def test_an_option_that_does_not_fit_is_one_settings_error_naming_adapter_and_key(
    table: str, message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        build(f"[[adapters]]\n{table}\n")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_two_bad_keys_are_counted_in_the_one_line() -> None:
    with pytest.raises(SettingsError, match=r"unknown key 'a' \(and 1 more\)$"):
        build("[[adapters]]\nkind = 'searxng'\na = 1\nb = 2\n")


def test_defaults_live_in_the_options_and_only_written_keys_are_kept() -> None:
    settings = Settings.from_toml("[[adapters]]\nkind = 'open_meteo'\nid = 'weather'\n")
    (adapter,) = settings.adapters
    assert adapter.option_values == {}
    options = adapter.options_as(OpenMeteoAdapter.Options)
    assert options.base_url == "https://api.open-meteo.com/v1"
    assert options.geocoding_url == "https://geocoding-api.open-meteo.com/v1"
    with ExternalQueryService(settings) as service:
        (built,) = service.gateway.adapters.values()
    assert isinstance(built, OpenMeteoAdapter)
    assert built.options == options
    assert built.base_url == "https://api.open-meteo.com/v1"


def test_path_options_resolve_against_the_settings_files_folder(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "settings.toml"
    path.write_text(
        "[[adapters]]\nkind = 'test_catalog'\nid = 'near'\ncatalog = 'books'\nlabel = 'books'\n\n"
        "[[adapters]]\nkind = 'test_catalog'\nid = 'far'\ncatalog = '/srv/books'\n",
        encoding="utf-8",
    )
    settings = Settings.load(path).with_docs(tmp_path)  # another adapter keeps the folder
    near, far, docs = (adapter_options(adapter) for adapter in settings.adapters)
    assert isinstance(near, CatalogAdapter.Options)
    assert isinstance(far, CatalogAdapter.Options)
    assert near.catalog == tmp_path / "conf" / "books"
    assert near.label == "books"  # text is text, even when it looks like a relative path
    assert far.catalog == Path("/srv/books")
    assert docs.model_dump() == {"root": tmp_path}
    # Without a settings file there is no folder to resolve against.
    loose = Settings.from_toml("[[adapters]]\nkind = 'test_catalog'\ncatalog = 'books'\n")
    assert adapter_options(loose.adapters[0]).model_dump()["catalog"] == Path("books")


def test_the_adapter_reads_its_typed_options() -> None:
    with build("[[adapters]]\nkind = 'test_catalog'\ncatalog = '/srv'\nlimit = 7\n") as service:
        (adapter,) = service.gateway.adapters.values()
    assert isinstance(adapter, CatalogAdapter)
    assert adapter.options == CatalogAdapter.Options(catalog=Path("/srv"), limit=7)
    assert adapter.config.option_values == {"catalog": "/srv", "limit": 7}


def test_the_envelope_hashes_as_when_the_keys_were_shared_fields() -> None:
    # Plan ids hash this envelope; its id is the one these settings had before adapter keys
    # were typed per adapter (base_url, geocoding_url and root were shared fields then).
    settings = Settings.from_toml(
        """
[[adapters]]
kind = "searxng"
id = "searx"
base_url = "http://127.0.0.1:8888"

[[adapters]]
kind = "open_meteo"
id = "weather"

[[adapters]]
kind = "frankfurter"
id = "fx"
base_url = "https://fx.example/v1"
enabled = false

[[adapters]]
kind = "local_docs"
id = "docs"
root = "/srv/handbook"

[[adapters]]
kind = "test_quotes"
id = "quotes"
base_url = "https://quotes.example/api"
"""
    )
    envelope = service_envelope(settings)
    assert envelope["adapters"]["weather"] == {  # type: ignore[index,call-overload]
        "base_url": None,
        "enabled": True,
        "geocoding_url": None,
        "kind": "open_meteo",
        "options": {},
        "root": None,
    }
    assert content_id(envelope) == (
        "sha256:372ae2ef6de6eb143b9c6f5a770995271889b8b1ba665dd06a2f0bbf71ef19ab"
    )


def test_other_keys_hash_where_the_options_table_hashed_them() -> None:
    settings = Settings.from_toml("[[adapters]]\nkind = 'test_catalog'\nid = 'c'\nlimit = 0.5\n")
    assert service_envelope(settings)["adapters"]["c"]["options"] == {"limit": "0.5"}  # type: ignore[index,call-overload]
