"""A throwaway certificate authority, so a world can serve ``https://`` URLs unchanged.

The CA exists only for one world: its certificate goes into ``[network] ca_bundle`` and its
server context issues a leaf certificate for whatever name the client asks for (SNI), so
hosts can be added while the world runs. Needs the optional ``trustme`` package.
"""

from __future__ import annotations

import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    import trustme

__all__ = [
    "INSTALL_HINT",
    "WorldCA",
]

INSTALL_HINT = "serving https URLs needs trustme: pip install 'external_query_service[testing]'"


def _trustme() -> trustme.CA:
    try:
        import trustme
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return trustme.CA()


class WorldCA:
    """One CA; ``server_context()`` for the TLS server, ``write_pem(path)`` for clients."""

    #: The certificate presented when a client sends no server name (an IP-literal URL).
    DEFAULT_NAMES = ("localhost", "127.0.0.1")

    def __init__(self) -> None:
        self._ca = _trustme()
        self._lock = threading.Lock()
        self._contexts: dict[str, ssl.SSLContext] = {}

    def write_pem(self, path: Path) -> Path:
        """Write the CA certificate (PEM) to ``path``: what ``ca_bundle`` should name."""
        self._ca.cert_pem.write_to_path(str(path))
        return path

    def _context_for(self, *names: str) -> ssl.SSLContext:
        key = ",".join(names)
        with self._lock:
            context = self._contexts.get(key)
            if context is None:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                self._ca.issue_cert(*names).configure_cert(context)
                self._contexts[key] = context
            return context

    def server_context(self) -> ssl.SSLContext:
        """A server context that answers every SNI name with a certificate for that name."""
        context = self._context_for(*self.DEFAULT_NAMES)

        def choose(
            sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, _: ssl.SSLContext
        ) -> None:
            if name:
                sock.context = self._context_for(name.lower())

        context.sni_callback = choose
        return context
