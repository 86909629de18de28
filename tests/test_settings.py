"""Settings: TOML in, validated sections out; unknown keys are errors."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from external_query_service import Settings, SettingsError
from external_query_service.adapters._local_docs import LocalDocsAdapter


def test_full_settings_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "external-query.toml"
    path.write_text(
        """
[network]
allowed_networks = ["10.0.0.0/8", "fd00::/8"]
resolve = { "Docs.Example." = "127.0.0.1" }
timeout_s = 4.5
deadline_s = 12
max_page_bytes = 500000
max_pages = 3
user_agent = "my-bot/1.0"

[[adapters]]
kind = "searxng"
id = "searx"
base_url = "http://127.0.0.1:8888"

[[adapters]]
kind = "local_docs"
root = "handbook"

[sources]
allow_domains = ["Example.com."]
deny_domains = ["spam.example"]

[verifier]
min_sources_summary = 2
max_age_days = 7
""",
        encoding="utf-8",
    )
    settings = Settings.load(path)
    assert settings.network.allowed_networks == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
    )
    assert settings.network.resolve == {"docs.example": "127.0.0.1"}
    assert settings.network.user_agent == "my-bot/1.0"
    assert [a.id for a in settings.adapters] == ["searx", "local_docs"]
    assert settings.adapters[1].options_as(LocalDocsAdapter.Options).root == tmp_path / "handbook"
    assert settings.sources.allow_domains == ("example.com",)
    assert settings.verifier.min_sources_summary == 2


def test_defaults_activate_no_network_adapter() -> None:
    settings = Settings()
    assert settings.adapters == ()
    assert settings.network.allowed_networks == ()
    assert settings.verifier.min_sources_direct_fact == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[network]\nproxy = 'x'\n", "network.proxy: unknown key"),
        ("[[adapters]]\nid = 'searx'\n", "adapters.0.kind: Field required"),
        ("[network]\nallowed_networks = ['300.1.1.1/8']\n", "not a CIDR network"),
        ("[network]\nresolve = { a = 'nowhere' }\n", "not an IP address"),
        ("[network]\ntimeout_s = -1\n", "network.timeout_s"),
        (
            "[[adapters]]\nkind = 'searxng'\n[[adapters]]\nkind = 'searxng'\n",
            "duplicate adapter ids: searxng",
        ),
        ("title = 'x'\n", "title: unknown key"),
        ("[network\n", "invalid TOML"),
    ],
)
def test_invalid_settings_raise_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_toml(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="not found"):
        Settings.load(tmp_path / "absent.toml")


def test_with_docs_adds_a_local_docs_adapter(tmp_path: Path) -> None:
    settings = Settings().with_docs(tmp_path)
    assert [(a.kind, a.id, a.option_values) for a in settings.adapters] == [
        ("local_docs", "docs", {"root": tmp_path})
    ]


def test_a_fifo_or_folder_as_settings_file_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "settings.fifo"
    os.mkfifo(fifo)
    with pytest.raises(SettingsError, match="not a regular file"):
        Settings.load(fifo)
    with pytest.raises(SettingsError, match="not a regular file"):
        Settings.load(tmp_path)
