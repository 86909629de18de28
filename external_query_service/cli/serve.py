"""``external-query serve``: the answer chain as an HTTP service (``server/``).

Exit codes: 0 when stopped by SIGINT or SIGTERM (in-flight questions get ``[server]
shutdown_grace_s`` to finish); 2 bad input: settings, flags, an address that cannot be
bound, ``--workers`` above 1 without ``[cache] url``, a non-loopback ``--host`` with no
API key configured and no ``--insecure-no-auth``, or the ``[server]`` extra missing (one
line with the install command).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._clock import fixed_clock
from ..errors import InputError
from ._help import Subparsers, add_command
from ._model import add_model_flags
from .ask import _settings as settings_from_flags
from .ask import no_data_source

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "register"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080

_DESCRIPTION = """\
Serve the answer chain over HTTP: one long-lived service for many callers at once.

  POST /v1/answer                         {"question": ..., "semantics": {...}?, "stream": bool?}
  POST /v1/sessions/{session_id}/follow-up
  GET  /v1/evidence/{ref}?offset=&limit=  GET /healthz  GET /readyz  GET /metrics
  POST /v1/chat/completions  GET /v1/models   (OpenAI's format, for chat front-ends)
  GET  /openapi.json  GET /docs  GET /redoc   (no key, no limit; [server] docs = false: none)

Limits come from --config: [network] max_concurrent_questions and queue_timeout_s,
[server] request_deadline_s, max_request_bytes, max_sessions, session_idle_s,
shutdown_grace_s, requests_per_minute and max_concurrent_per_key. Requests need an API key
(Authorization: Bearer, or X-API-Key) when [server] api_keys_env or api_key_hashes names
one; a non-loopback --host without keys is refused unless --insecure-no-auth. --workers N
runs N processes on one socket; they share the ledger, the cache and the rate limits, and
need [cache] url (Redis) so that follow-up sessions reach every worker. Every log line goes
to stderr (--log-format text or json, --log-level); the access line names the request id.
Needs the extra: pip install 'external_query_service[server]'."""


def register(commands: Subparsers) -> None:
    """Add the ``serve`` command to ``commands``."""
    serve = add_command(
        commands,
        "serve",
        summary="serve the answer chain over HTTP (FastAPI under uvicorn)",
        description=_DESCRIPTION,
        exit_codes=[
            (0, "stopped by SIGINT or SIGTERM, in-flight questions finished or cancelled"),
            (
                2,
                "bad input: settings, a flag, an address that cannot be bound, --workers\n"
                "above 1 without [cache] url, a non-loopback --host with no API key and no\n"
                "--insecure-no-auth, or the [server] extra not installed (one line on stderr)",
            ),
            (1, "an internal failure"),
        ],
        examples=[
            "external-query serve --docs docs/architecture --port 8080",
            "external-query serve --world examples/cases/worlds/zhanjiang-weather",
            "external-query serve --config external-query.toml --host 0.0.0.0 --port 9000",
            "external-query serve --config external-query.toml --workers 4 --port 9000",
        ],
    )
    serve.add_argument("--config", metavar="FILE", type=Path, help="settings file (TOML)")
    serve.add_argument("--docs", metavar="DIR", type=Path, help="add a local_docs adapter over DIR")
    serve.add_argument(
        "--world",
        type=Path,
        metavar="DIR",
        help="serve a recorded world folder replayed on loopback (its settings and clock)",
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; 0.0.0.0 for every interface)",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="worker processes accepting on the one socket (default 1; above 1 needs [cache] url)",
    )
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="every log line on stderr as text (default) or as one JSON object each "
        "(uvicorn's lines, the access line with its request_id, the answer line)",
    )
    serve.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default="info",
        help="the least severe line logged (default info: the access and answer lines)",
    )
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve on a non-loopback address with no API key configured (anyone who "
        "reaches the port spends the provider keys); without it that is refused",
    )
    add_model_flags(serve)
    serve.set_defaults(handler=_run)


def _port(value: str) -> int:
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {value!r}")
    return int(value)


def _workers(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise argparse.ArgumentTypeError(f"not a number of workers (1-64): {value!r}")
    return int(value)


def _run(args: argparse.Namespace) -> int:
    # Checked before anything else, so a missing extra fails fast with the install hint.
    from ..server import require_server_extra

    require_server_extra()
    from ..server._run import serve

    if args.world is not None:
        return _serve_world(args)
    settings = settings_from_flags(args)
    if not any(adapter.enabled for adapter in settings.adapters):
        raise no_data_source()
    serve(
        settings,
        host=args.host,
        port=args.port,
        workers=args.workers,
        insecure_no_auth=args.insecure_no_auth,
        log_format=args.log_format,
        log_level=args.log_level,
    )
    return 0


def _serve_world(args: argparse.Namespace) -> int:
    """``--world``: the world served on loopback for as long as the service runs, which
    answers on the world's settings and clock (one process: the world lives in this one)."""
    from ..server._run import serve
    from ..testing.world import open_world  # only a replay needs the world server

    if args.config is not None:
        raise InputError("--world brings its own settings; drop --config")
    if args.workers > 1:
        raise InputError("--world serves from one process; drop --workers")
    with open_world(args.world) as world:
        settings = settings_from_flags(args, world.settings())
        serve(
            settings,
            host=args.host,
            port=args.port,
            insecure_no_auth=args.insecure_no_auth,
            clock=fixed_clock(world.now) if world.now is not None else None,
            recorded_walks=world.recorded_walks(),
            log_format=args.log_format,
            log_level=args.log_level,
        )
    return 0
