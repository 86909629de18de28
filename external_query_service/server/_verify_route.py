"""``POST /v1/verify``: check an answer bundle again, offline or against its cited pages.

The route runs ``averify_bundle`` under the service's own settings: a refetch goes through
the same guarded fetcher and limits as the answers did (``[network]``), signatures are
checked with ``[bundle] signing_key_env`` and plan ids looked up in ``[ledger]``. It answers
200 with the verification for every verdict (the verdict is data, not an error); a body that
is not a bundle is 422 ``invalid_bundle``; a refetch past the request deadline is 504.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import FastAPI
from pydantic import Field, JsonValue

from .._bundle import bundle_secret
from .._frozen import Frozen
from ..bundle import BundleVerification, averify_bundle
from ..errors import ApiError, InputError
from ..service import ExternalQueryService

__all__ = ["VerifyRequest", "add_verify_route"]


class VerifyRequest(Frozen):
    """A bundle to check, and whether to fetch its pages again."""

    bundle: dict[str, JsonValue] | str = Field(
        description="The bundle: the object an answer's `bundle` holds, or its JSON text "
        "(`ask --format bundle`, `answer.bundle()`)."
    )
    refetch: bool = Field(
        default=False,
        description="Fetch every cited page again and look for each quote (default: check "
        "the bundle's own digests and signature only).",
    )


def add_verify_route(
    app: FastAPI, service: ExternalQueryService, *, errors: dict[int | str, dict[str, Any]]
) -> None:
    """Register ``POST /v1/verify`` on ``app``, checking under ``service``'s settings. A
    ``[bundle] signing_key_env`` that names an unset variable is a ``SettingsError`` here,
    at start-up, rather than on the first bundle signed or checked."""
    bundle_secret(service.settings.bundle.signing_key_env)
    limits = service.settings.server

    @app.post(
        "/v1/verify",
        response_model=BundleVerification,
        responses=errors,
        summary="Check an answer bundle again: offline, or against the pages it cites",
    )
    async def verify(request: VerifyRequest) -> BundleVerification:
        given = request.bundle
        text = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
        deadline = asyncio.timeout(limits.request_deadline_s)
        try:
            async with deadline:
                return await averify_bundle(
                    text, settings=service.settings, refetch=request.refetch
                )
        except InputError as exc:
            raise ApiError(422, "invalid_bundle", str(exc)) from None
        except TimeoutError:
            if not deadline.expired():
                raise
            raise ApiError(
                504,
                "deadline_exceeded",
                f"no verification within the request deadline of {limits.request_deadline_s:g} s",
            ) from None
