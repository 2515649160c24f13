"""What a browser must not be made to do (docs/security.md): a web page a user opens can send
requests to any address, the user's local Jumpgate included, but it cannot read the answers unless
the server says so (it never does: no CORS headers), cannot set an `Authorization` header on a
simple request, and cannot send JSON without a preflight the server refuses. So a request that
changes something is refused when it comes from another site (its `Origin` or `Sec-Fetch-Site`
says so) or, sent by a browser (it carries `Sec-Fetch-*`, `Origin` or `Referer`), posts to the
REST API a body not declared JSON: the content types a page may send without a preflight. Tools
(curl, scripts, the clients) send none of those headers and are not asked for a content type."""
from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

SAFE = {"GET", "HEAD", "OPTIONS"}


def refuse_cross_site(request: Request) -> tuple[int, str] | None:
    """(status, message) when the request must be refused; None when it may go on."""
    if request.method in SAFE:
        return None
    if request.headers.get("sec-fetch-site", "") == "cross-site":
        return 403, "cross-site request refused (Sec-Fetch-Site: cross-site)"
    origin = request.headers.get("origin")
    if origin is not None:
        host = request.headers.get("host", "")
        parts = urlsplit(origin)
        if origin == "null" or parts.netloc.lower() != host.lower():
            return 403, f"cross-origin request refused: Origin {origin} is not this server ({host})"
    if request.url.path.startswith("/v1/") and _has_body(request) and _from_a_browser(request):
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return 415, f"the request body must be JSON (Content-Type: application/json), not {kind or 'undeclared'}"
    return None


def _from_a_browser(request: Request) -> bool:
    h = request.headers
    return any(k in h for k in ("sec-fetch-mode", "sec-fetch-site", "origin", "referer"))


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return bool(request.headers.get("transfer-encoding")) or (length is not None and length.strip() not in ("", "0"))
