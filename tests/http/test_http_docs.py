"""docs/http.md states the interface: every HTTP flag and every route must be in it."""

from __future__ import annotations

from pathlib import Path

from naiad import Server
from naiad.cli import build_parser
from naiad.frontends.http import create_app

DOC = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()


def test_every_http_flag_is_documented():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    flags = [
        option
        for action in serve._actions
        for option in action.option_strings
        if option.startswith("--http") or option in ("--allow-http", "--backend-plugin")
    ]
    assert len(flags) >= 6
    for flag in flags:
        assert f"`{flag}" in DOC, f"{flag} is not documented in docs/http.md"


def test_every_route_is_documented():
    app = create_app(Server())
    paths = {route.path for route in app.routes}  # type: ignore[attr-defined]
    for path in paths:
        if "/versions/" in path:
            # Documented once, as the versioned form of each model path.
            assert path.replace("/versions/{version:int}", "") in paths
            continue
        documented = path.replace("{model}", "{m}").replace("{region}", "{r}")
        assert f"`{documented}`" in DOC or f" {documented}`" in DOC, f"{path} is not documented in docs/http.md"
