"""The OpenAPI 3 description of the HTTP API (`GET /v2/openapi.json`), generated from the
route table `create_app` serves: every path and method comes from the table, so the two
cannot drift; what a route means (its summary, bodies and answers) comes from `OPERATIONS`,
keyed by the handler's name, and a route without an entry there is an error when the app
is built, not a gap in the document.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Operation", "OPERATIONS", "openapi_document", "openapi_path"]

_PARAMETER = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)(?::([a-z]+))?\}")

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Operation:
    """What one handler does: a summary, its tag, the schema of its JSON body (None: no
    body) and of its 200 answer (None: an empty answer), as component names."""

    summary: str
    tag: str
    request: str | None = None
    response: str | None = None
    # The body is optional (load/unload without parameters, an empty index request).
    request_optional: bool = False
    # The 200 answer's media type when it is not JSON.
    media_type: str = JSON


def _obj(properties: dict[str, Any] | None = None, required: Iterable[str] = (), **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    schema.update(extra)
    return schema


_STR = {"type": "string"}
_INT = {"type": "integer"}
_ANY_OBJECT = _obj(additionalProperties=True)
_PARAMETERS = _obj(additionalProperties=True, description="KServe parameters: names to booleans, numbers or strings")
_DURATION = _obj({"count": _INT, "ns": _INT})

_TENSOR = _obj(
    {
        "name": _STR,
        "datatype": _STR,
        "shape": {"type": "array", "items": _INT},
        "parameters": {"$ref": "#/components/schemas/Parameters"},
        "data": {"type": "array", "items": {}, "description": "row-major elements, flat or nested"},
    },
    required=["name", "datatype", "shape"],
)

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _obj({"error": _STR}, required=["error"]),
    "Parameters": _PARAMETERS,
    "ServerMetadata": _obj(
        {"name": _STR, "version": _STR, "extensions": {"type": "array", "items": _STR}}, required=["name", "version"]
    ),
    "TensorMetadata": _obj(
        {"name": _STR, "datatype": _STR, "shape": {"type": "array", "items": _INT}},
        required=["name", "datatype", "shape"],
    ),
    "ModelMetadata": _obj(
        {
            "name": _STR,
            "versions": {"type": "array", "items": _STR},
            "platform": _STR,
            "inputs": {"type": "array", "items": {"$ref": "#/components/schemas/TensorMetadata"}},
            "outputs": {"type": "array", "items": {"$ref": "#/components/schemas/TensorMetadata"}},
        },
        required=["name", "platform"],
    ),
    "ModelConfig": _obj(additionalProperties=True, description="the model's config in Triton's JSON form"),
    "InferenceRequest": _obj(
        {
            "id": _STR,
            "parameters": {"$ref": "#/components/schemas/Parameters"},
            "inputs": {"type": "array", "items": {"$ref": "#/components/schemas/RequestTensor"}},
            "outputs": {
                "type": "array",
                "items": _obj({"name": _STR, "parameters": {"$ref": "#/components/schemas/Parameters"}}, ["name"]),
            },
        },
        required=["inputs"],
    ),
    "RequestTensor": _TENSOR,
    "InferenceResponse": _obj(
        {
            "model_name": _STR,
            "model_version": _STR,
            "id": _STR,
            "parameters": {"$ref": "#/components/schemas/Parameters"},
            "outputs": {"type": "array", "items": {"$ref": "#/components/schemas/RequestTensor"}},
        },
        required=["model_name", "outputs"],
    ),
    "GenerateRequest": _obj(
        additionalProperties=True, description="inputs and parameters by name (Triton's generate extension)"
    ),
    "GenerateResponse": _obj(
        additionalProperties=True, description="outputs by name, with model_name and model_version"
    ),
    "ModelStatistics": _obj(
        {
            "model_stats": {
                "type": "array",
                "items": _obj(
                    {
                        "name": _STR,
                        "version": _STR,
                        "last_inference": _INT,
                        "inference_count": _INT,
                        "execution_count": _INT,
                        "inference_stats": _obj(
                            {
                                key: _DURATION
                                for key in (
                                    "success",
                                    "fail",
                                    "queue",
                                    "compute_input",
                                    "compute_infer",
                                    "compute_output",
                                    "cache_hit",
                                    "cache_miss",
                                )
                            }
                        ),
                        "batch_stats": {"type": "array", "items": _ANY_OBJECT},
                    }
                ),
            }
        },
        required=["model_stats"],
    ),
    "RepositoryIndexRequest": _obj({"ready": {"type": "boolean"}}),
    "RepositoryIndex": {
        "type": "array",
        "items": _obj({"name": _STR, "version": _STR, "state": _STR, "reason": _STR}, required=["name"]),
    },
    "RepositoryRequest": _obj({"parameters": {"$ref": "#/components/schemas/Parameters"}}),
    "LogSettings": _obj(
        additionalProperties=True,
        description="log_file, log_info, log_warning, log_error, log_verbose_level, log_format",
    ),
    "TraceSettings": _obj(
        additionalProperties=True, description="trace_level, trace_rate, trace_count, log_frequency, ..."
    ),
    "SystemSharedMemoryRegister": _obj({"key": _STR, "offset": _INT, "byte_size": _INT}, required=["key", "byte_size"]),
    "CudaSharedMemoryRegister": _obj(
        {"raw_handle": _obj({"b64": _STR}, required=["b64"]), "device_id": _INT, "byte_size": _INT},
        required=["raw_handle", "device_id", "byte_size"],
    ),
    "SharedMemoryStatus": {"type": "array", "items": _ANY_OBJECT},
    "Status": _obj(
        {
            "server": _obj(
                {
                    "name": _STR,
                    "version": _STR,
                    "uptime_s": {"type": "number"},
                    "workers": _INT,
                    "model_control_mode": _STR,
                    "resident_bytes": {"type": "integer", "nullable": True},
                }
            ),
            "models": {
                "type": "array",
                "items": _obj(
                    {
                        "name": _STR,
                        "version": _STR,
                        "state": _STR,
                        "reason": _STR,
                        "figures": {"type": "object", "nullable": True, "additionalProperties": True},
                    }
                ),
            },
        },
        required=["server", "models"],
    ),
    "OpenApi": _obj(additionalProperties=True, description="this document"),
}

# handler name -> what it does. Tags group the operations as Triton's docs group the
# protocol and its extensions.
OPERATIONS: dict[str, Operation] = {
    "live": Operation("Whether the server is live (200) or not (400)", "health"),
    "ready": Operation("Whether the server is ready (200) or not (400)", "health"),
    "server_metadata": Operation("The server's name, version and extensions", "metadata", response="ServerMetadata"),
    "model_metadata": Operation(
        "A model's versions, platform, inputs and outputs", "metadata", response="ModelMetadata"
    ),
    "model_ready": Operation("Whether a model (version) is ready (200) or not (400)", "health"),
    "model_config": Operation(
        "A model's configuration (model configuration extension)", "model-config", response="ModelConfig"
    ),
    "statistics": Operation("Per-version statistics (statistics extension)", "statistics", response="ModelStatistics"),
    "infer": Operation(
        "Run an inference; with the binary-tensor extension the body is JSON followed by raw tensors",
        "inference",
        request="InferenceRequest",
        response="InferenceResponse",
    ),
    "generate": Operation("Generate (Triton's generate extension)", "inference", "GenerateRequest", "GenerateResponse"),
    "generate_stream": Operation(
        "Generate, answered as server-sent events", "inference", "GenerateRequest", None, media_type="text/event-stream"
    ),
    "logging": Operation(
        "Read (GET) or change (POST) the log settings (logging extension)",
        "logging",
        "LogSettings",
        "LogSettings",
        True,
    ),
    "trace_setting": Operation(
        "Read (GET) or change (POST) trace settings, server-wide or per model (trace extension)",
        "trace",
        "TraceSettings",
        "TraceSettings",
        True,
    ),
    "repository_index": Operation(
        "Every model of the repositories with its state (model repository extension)",
        "model-repository",
        "RepositoryIndexRequest",
        "RepositoryIndex",
        True,
    ),
    "load": Operation(
        "Load or reload a model, optionally with a config and files (explicit model control)",
        "model-repository",
        "RepositoryRequest",
        None,
        True,
    ),
    "unload": Operation(
        "Unload a model; parameter unload_dependents (explicit model control)",
        "model-repository",
        "RepositoryRequest",
        None,
        True,
    ),
    "shm_status": Operation("Registered system shared-memory regions", "shared-memory", response="SharedMemoryStatus"),
    "shm_register": Operation("Register a system shared-memory region", "shared-memory", "SystemSharedMemoryRegister"),
    "shm_unregister": Operation("Unregister one or every system shared-memory region", "shared-memory"),
    "cuda_shm_status": Operation(
        "Registered CUDA shared-memory regions", "shared-memory", response="SharedMemoryStatus"
    ),
    "cuda_shm_register": Operation(
        "Register a CUDA shared-memory region from a client's CUDA IPC handle (refused without CUDA)",
        "shared-memory",
        "CudaSharedMemoryRegister",
    ),
    "cuda_shm_unregister": Operation("Unregister one or every CUDA shared-memory region", "shared-memory"),
    "status_page": Operation("The status page (HTML)", "status", media_type="text/html"),
    "status_asset": Operation("A script or style sheet of the status page", "status", media_type="text/plain"),
    "status": Operation(
        "The status page's figures: every model with state and counters, the server's uptime",
        "status",
        response="Status",
    ),
    "openapi": Operation("This OpenAPI description", "documentation", response="OpenApi"),
    "api_docs": Operation("Swagger UI on this description (HTML)", "documentation", media_type="text/html"),
    "api_docs_asset": Operation("A script or style sheet of Swagger UI", "documentation", media_type="text/plain"),
}


def openapi_path(path: str) -> str:
    """A starlette path (`{version:int}`) as OpenAPI writes it (`{version}`)."""
    return _PARAMETER.sub(r"{\1}", path)


def _parameters(path: str) -> list[dict[str, Any]]:
    out = []
    for name, kind in _PARAMETER.findall(path):
        schema = {"type": "integer", "minimum": 0} if kind == "int" else {"type": "string"}
        out.append({"name": name, "in": "path", "required": True, "schema": schema})
    return out


def _operation(operation_id: str, method: str, spec: Operation) -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    ok: dict[str, Any] = {"description": "success"}
    if spec.response is not None:
        ok["content"] = {spec.media_type: {"schema": {"$ref": f"#/components/schemas/{spec.response}"}}}
    elif spec.media_type != JSON:
        ok["content"] = {spec.media_type: {"schema": {"type": "string"}}}
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": spec.summary,
        "tags": [spec.tag],
        "responses": {
            "200": ok,
            "400": {"description": "bad request, or the model is not available", "content": error},
            "403": {"description": "restricted API without its header (--http-restricted-api)", "content": error},
        },
    }
    if spec.request is not None and method == "POST":
        operation["requestBody"] = {
            "required": not spec.request_optional,
            "content": {JSON: {"schema": {"$ref": f"#/components/schemas/{spec.request}"}}},
        }
    return operation


def openapi_document(
    routes: Iterable[tuple[str, Callable[..., Any], list[str]]], title: str, version: str
) -> dict[str, Any]:
    """The OpenAPI 3.0 document of `routes` (path, handler, methods)."""
    paths: dict[str, dict[str, Any]] = {}
    for path, handler, methods in routes:
        name = handler.__name__
        spec = OPERATIONS.get(name)
        if spec is None:
            raise LookupError(f"route {path} ({name}) has no OpenAPI description in naiad.frontends.http.openapi")
        item = paths.setdefault(openapi_path(path), {})
        parameters = _parameters(path)
        if parameters:
            item["parameters"] = parameters
        # One handler serves several paths: the id comes from the path, unique as it is.
        suffix = re.sub(r"[^a-zA-Z0-9]+", "_", openapi_path(path)).strip("_") or "root"
        for method in methods:
            item[method.lower()] = _operation(f"{method.lower()}_{suffix}", method, spec)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": title,
            "version": version,
            "description": "The KServe v2 inference protocol with Triton's extensions, as naiad serves it.",
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
