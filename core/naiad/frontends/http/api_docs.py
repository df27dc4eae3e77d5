"""`GET /v2/openapi.json` (openapi.py's document of the routes this app serves) and Swagger
UI on it at `GET /v2/docs`, as MLServer serves its docs. Swagger UI's files come from the
`swagger-ui-bundle` package (`pip install 'naiad[docs]'`), served from this server: the
page works without reaching any other host."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...version import __version__
from .openapi import openapi_document
from .responses import json_response

__all__ = ["ApiDocs", "swagger_ui_directory"]

# Swagger UI's files the page loads; a client's name only selects one of these.
_SWAGGER_FILES = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "favicon-32x32.png": "image/png",
}

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>naiad API</title>
<link rel="stylesheet" href="/v2/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/v2/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/v2/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({url: "/v2/openapi.json", dom_id: "#swagger-ui"});</script>
</body>
</html>
"""

_MISSING = (
    "Swagger UI is not installed on this server: pip install 'naiad[docs]' (the description is at /v2/openapi.json)"
)


def swagger_ui_directory() -> Path | None:
    """Where the installed swagger-ui-bundle keeps Swagger UI's files; None without it."""
    try:
        from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    return Path(swagger_ui_path)


class ApiDocs:
    """The description, built once from the app's route table, and Swagger UI."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {}
        self._swagger = swagger_ui_directory()
        self._files: dict[str, bytes] = {}

    def describe(self, routes: Iterable[tuple[str, Callable[..., Any], list[str]]]) -> None:
        """Build the description of the app's routes (these handlers' own among them)."""
        self.document = openapi_document(routes, "naiad", __version__)

    async def openapi(self, request: Request) -> Response:
        return json_response(self.document)

    async def api_docs(self, request: Request) -> Response:
        if self._swagger is None:
            return json_response({"error": _MISSING}, 404)
        return Response(_PAGE, media_type="text/html; charset=utf-8")

    async def api_docs_asset(self, request: Request) -> Response:
        name = request.path_params["asset"]
        media = _SWAGGER_FILES.get(name)
        if media is None:
            return json_response({"error": f"Swagger UI has no file '{name}' here"}, 404)
        if self._swagger is None:
            return json_response({"error": _MISSING}, 404)
        content = self._files.get(name)
        if content is None:
            content = self._files[name] = (self._swagger / name).read_bytes()
        return Response(content, media_type=media)
