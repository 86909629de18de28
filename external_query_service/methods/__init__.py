"""Bundled evidence methods: providers this package executes itself (today only
``method:public-github``). Every other provider runs in its host, under its own
permission boundary, and returns a caller-authored receipt."""

from ._public_github import PROVIDER_ID as PUBLIC_GITHUB
from ._public_github import PublicGitHub, github_endpoints

__all__ = ["PUBLIC_GITHUB", "PublicGitHub", "github_endpoints"]
