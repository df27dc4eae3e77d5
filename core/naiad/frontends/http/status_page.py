"""The status page at `/` of the HTTP port: one HTML page, its script and style sheet
(shipped in the package, no build step), and the JSON it polls, `GET /status`, which
`Server.status` builds from the statistics the server keeps (under `--workers`, the model
home's, whichever process answers)."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from ...server import Server
from .responses import json_response

__all__ = ["StatusPage"]

# asset name in the URL -> (file in static/, media type). A client's name only selects an
# entry here; it never becomes a path.
_ASSETS = {
    "page.js": ("status.js", "text/javascript; charset=utf-8"),
    "page.css": ("status.css", "text/css; charset=utf-8"),
}


def static_file(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


class StatusPage:
    """The page's handlers, with its files read once."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._page = static_file("status.html")
        self._assets = {name: (static_file(file), media) for name, (file, media) in _ASSETS.items()}

    async def status_page(self, request: Request) -> Response:
        return Response(self._page, media_type="text/html; charset=utf-8")

    async def status_asset(self, request: Request) -> Response:
        found = self._assets.get(request.path_params["asset"])
        if found is None:
            known = ", ".join(sorted(self._assets))
            return json_response(
                {"error": f"the status page has no file '{request.path_params['asset']}' (it has {known})"}, 404
            )
        content, media = found
        return Response(content, media_type=media)

    async def status(self, request: Request) -> Response:
        return json_response(self.server.status())
