"""`KServeClient`: the KServe v2 HTTP/REST calls of naiad's client subcommands (`naiad
models`, `naiad infer`, `naiad tune`'s model control), on the standard library's urllib and JSON.

They speak the protocol as any client does, so they work against naiad and against Triton
alike, and the core needs no client library for them (tritonclient is only a test
dependency).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ..endpoint_url import split_endpoint

__all__ = ["ClientError", "KServeClient", "base_url"]


class ClientError(Exception):
    """A call that failed: the server's own error text, or why it could not be reached."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def base_url(url: str) -> str:
    """`http://HOST:PORT` from what `--url` accepts: HOST:PORT (as tritonclient takes it) or
    an http:// or https:// URL; ValueError naming what is wrong otherwise."""
    return split_endpoint(url, "--url", ("http", "https")).geturl()


@dataclass(frozen=True, slots=True)
class KServeClient:
    """One server's HTTP/REST endpoint (`base`, from `base_url`)."""

    base: str
    timeout_s: float = 60.0

    def repository_index(self) -> list[dict[str, str]]:
        """Every model of the repository, with version, state and reason where known."""
        rows: list[dict[str, str]] = self._call("POST", "/v2/repository/index", {})
        return rows

    def model_metadata(self, model: str, version: str = "") -> dict[str, Any]:
        metadata: dict[str, Any] = self._call("GET", _model_path(model, version))
        return metadata

    def infer(self, model: str, body: dict[str, Any], version: str = "") -> dict[str, Any]:
        response: dict[str, Any] = self._call("POST", _model_path(model, version) + "/infer", body)
        return response

    def model_config(self, model: str) -> dict[str, Any]:
        """The configuration the server runs the model with, in its JSON form."""
        config: dict[str, Any] = self._call("GET", _model_path(model, "") + "/config")
        return config

    def load_model(self, model: str, config: dict[str, Any] | None = None) -> None:
        """Load (or reload) a model; `config` overrides its configuration (the repository
        extension's `config` parameter, sent as JSON text as tritonclient sends it)."""
        body: dict[str, Any] = {} if config is None else {"parameters": {"config": json.dumps(config)}}
        self._call("POST", "/v2/repository/models/" + urllib.parse.quote(model, safe="") + "/load", body)

    def unload_model(self, model: str) -> None:
        self._call("POST", "/v2/repository/models/" + urllib.parse.quote(model, safe="") + "/unload", {})

    def server_ready(self) -> bool:
        """Whether the server answers its readiness probe with 200 (False when unreachable)."""
        try:
            with urllib.request.urlopen(self.base + "/v2/health/ready", timeout=self.timeout_s) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            return False

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ClientError(f"{method} {path}: HTTP {exc.code}: {_error_text(exc.read())}") from None
        except urllib.error.URLError as exc:
            raise ClientError(f"cannot reach the server at {self.base}: {exc.reason}") from None
        except (TimeoutError, ConnectionError) as exc:
            raise ClientError(f"cannot reach the server at {self.base}: {exc}") from None
        except json.JSONDecodeError:
            raise ClientError(
                f"{method} {path}: the server's answer is not JSON (is {self.base} a KServe v2 server?)"
            ) from None


def _model_path(model: str, version: str) -> str:
    path = "/v2/models/" + urllib.parse.quote(model, safe="")
    if version:
        path += "/versions/" + urllib.parse.quote(version, safe="")
    return path


def _error_text(body: bytes) -> str:
    """The `error` of a KServe error body, else the body itself."""
    try:
        document = json.loads(body)
    except ValueError:
        return body.decode(errors="replace").strip() or "(no body)"
    error = document.get("error") if isinstance(document, dict) else None
    return error if isinstance(error, str) else json.dumps(document)
