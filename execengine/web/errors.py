"""Exceptions of the web layer, under :class:`execengine.errors.ExecEngineError`.

    ExecEngineError
    └── WebError                    a page or a search provider could not be used
        ├── InvalidURLError         not an http(s) URL, credentials in it, bad host or port
        ├── BlockedAddressError     the host resolves to an address the SSRF guard refuses
        ├── FetchTimeoutError       no complete answer within ``web.timeout``
        ├── ConnectionFailedError   DNS, TCP or TLS failure, or the server broke the reply
        ├── RedirectError           too many redirects, a loop, or a redirect we will not follow
        └── ProviderError           a search provider is misconfigured or answered badly

Handlers turn these into ``{"error": ...}`` results; the messages are written for the model
and never contain API keys.
"""

from __future__ import annotations

from execengine.errors import ExecEngineError


class WebError(ExecEngineError):
    """A web request or search failed (an expected outcome the tools report as a value)."""


class InvalidURLError(WebError):
    """The URL cannot be fetched: scheme, host, port or credentials."""


class BlockedAddressError(WebError):
    """The host resolves to a loopback, private, link-local or otherwise internal address."""


class FetchTimeoutError(WebError):
    """The server did not answer completely within the time limit."""


class ConnectionFailedError(WebError):
    """Name resolution, connection, TLS or the HTTP exchange failed."""


class RedirectError(WebError):
    """A redirect chain was too long, looped, or led somewhere it may not go."""


class ProviderError(WebError):
    """A search provider is misconfigured or its answer could not be used."""
