"""``--llm-base-url`` and ``--llm-model``: the model flags ``ask``, ``run-task`` and ``mcp``
share. Either flag overrides its field of the settings' ``[llm]`` section; given without
an ``[llm]`` section, both are needed."""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from ..errors import InputError
from ..settings import LLMSettings, Settings, format_validation_error

__all__ = ["add_model_flags", "with_model"]


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--llm-base-url`` and ``--llm-model`` to ``parser``."""
    parser.add_argument(
        "--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint (overrides [llm])"
    )
    parser.add_argument("--llm-model", metavar="NAME", help="model name (overrides [llm])")


def with_model(args: argparse.Namespace, settings: Settings) -> Settings:
    """``settings`` with the model flags applied (``InputError`` when they do not add up)."""
    if not (args.llm_base_url or args.llm_model):
        return settings
    fields = settings.llm.model_dump() if settings.llm else {}
    if args.llm_base_url:
        fields["base_url"] = args.llm_base_url
    if args.llm_model:
        fields["model"] = args.llm_model
    try:
        llm = LLMSettings.model_validate(fields)
    except ValidationError as exc:
        raise InputError(f"--llm-*: {format_validation_error(exc)}") from None
    return settings.model_copy(update={"llm": llm})
