"""`GET /v2/openapi.json`: a valid OpenAPI 3 document (openapi-spec-validator) that lists
every route the HTTP app serves, each with its methods, and nothing it does not: every
operation it names answers over a real socket (never starlette's 404 or 405 for an
unknown route), and a route added without a description fails the app's construction."""

from __future__ import annotations

import os
import re

import httpx
import pytest
from http_servers import MODELS, server_process, start_server, write_repository
from starlette.routing import Route

from naiad import Server
from naiad.frontends.http import create_app
from naiad.frontends.http.openapi import openapi_document, openapi_path

openapi_spec_validator = pytest.importorskip("openapi_spec_validator")

# What starlette answers for a path no route matches, or a method a route does not take.
ROUTE_MISSES = ({"error": "Not Found"}, {"error": "Method Not Allowed"})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("openapi"), {"add_sub": MODELS["add_sub"]})
    with start_server(repo, "--model-control-mode", "explicit", "--load-model", "add_sub") as process:
        yield process


@pytest.fixture(scope="module")
def document(server):
    answer = httpx.get(f"http://{server.http_url}/v2/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    return answer.json()


def served_routes() -> set[tuple[str, str]]:
    """(OpenAPI path, method) of every route of the app, as starlette routes them."""
    app = create_app(Server())
    out = set()
    for route in app.routes:
        assert isinstance(route, Route)
        for method in route.methods or ():
            if method != "HEAD":  # starlette adds HEAD to every GET route
                out.add((openapi_path(route.path), method))
    return out


def test_the_document_is_valid_openapi_3(document):
    openapi_spec_validator.validate(document)
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "naiad"


def test_the_document_lists_exactly_the_routes_served(document):
    documented = {
        (path, method.upper()) for path, item in document["paths"].items() for method in item if method != "parameters"
    }
    assert documented == served_routes()
    # Triton's endpoints and the extensions all appear, with their path parameters.
    versioned = document["paths"]["/v2/models/{model}/versions/{version}/infer"]
    assert [p["name"] for p in versioned["parameters"]] == ["model", "version"]
    assert versioned["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/InferenceRequest"
    }
    for path in (
        "/v2/repository/models/{model}/load",
        "/v2/systemsharedmemory/region/{region}/register",
        "/v2/logging",
        "/",
    ):
        assert path in document["paths"]


def concrete(path: str) -> str:
    return re.sub(
        r"\{model\}",
        "add_sub",
        re.sub(r"\{version\}", "1", re.sub(r"\{region\}", "r0", re.sub(r"\{asset\}", "page.js", path))),
    )


def test_every_documented_operation_is_served(server, document):
    base = f"http://{server.http_url}"
    with httpx.Client() as client:
        for path, item in document["paths"].items():
            for method in item:
                if method == "parameters" or path.endswith("/unload"):
                    continue  # unloading would change what the next requests see
                answer = client.request(
                    method.upper(), base + concrete(path), content=b"{}" if method == "post" else None
                )
                assert answer.status_code not in (404, 405) or answer.json() not in ROUTE_MISSES, (method, path)


def test_a_route_without_a_description_is_an_error():
    async def undescribed(request):
        raise AssertionError

    with pytest.raises(LookupError, match=r"route /v2/new \(undescribed\) has no OpenAPI description"):
        openapi_document([("/v2/new", undescribed, ["GET"])], "naiad", "0")


def test_swagger_ui_is_served_from_this_server(server):
    base = f"http://{server.http_url}"
    page = httpx.get(base + "/v2/docs")
    assert page.status_code == 200 and 'src="/v2/docs/swagger-ui-bundle.js"' in page.text
    # Every file the page loads is this server's: no scheme, no other host.
    assert re.findall(r'(?:src|href)="([^"]+)"', page.text) == [
        "/v2/docs/swagger-ui.css",
        "/v2/docs/favicon-32x32.png",
        "/v2/docs/swagger-ui-bundle.js",
    ]
    bundle = httpx.get(base + "/v2/docs/swagger-ui-bundle.js")
    assert bundle.status_code == 200 and len(bundle.content) > 500_000
    unknown = httpx.get(base + "/v2/docs/index.html")
    assert unknown.status_code == 404 and unknown.json() == {"error": "Swagger UI has no file 'index.html' here"}


def test_without_swagger_ui_installed_the_docs_say_how_to_get_it(tmp_path):
    # A module of that name that fails to import stands for the package not installed.
    hidden = tmp_path / "hide" / "swagger_ui_bundle"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    repo = write_repository(tmp_path / "models", {"add_sub": MODELS["add_sub"]})
    process = server_process(repo)
    process.env["PYTHONPATH"] = os.pathsep.join((str(hidden.parent), process.env["PYTHONPATH"]))
    with process:
        answer = httpx.get(f"http://{process.http_url}/v2/docs")
        description = httpx.get(f"http://{process.http_url}/v2/openapi.json")
    assert answer.status_code == 404
    assert answer.json() == {
        "error": "Swagger UI is not installed on this server: pip install 'naiad[docs]' "
        "(the description is at /v2/openapi.json)"
    }
    assert description.status_code == 200
