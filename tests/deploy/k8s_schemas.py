"""Schema validation of Kubernetes objects for the deployment tests.

Built-in kinds: kubernetes-validate's strict schemas (unknown fields are errors). Custom
resources: JSON schemas of their CRDs, closed the same way. The ServiceMonitor's comes from
the models cloudcoil generates from the Prometheus operator's published CRDs; no package
ships KServe's, so KSERVE_SCHEMAS below spell out the fields of its CRDs that carry KServe's
own types (names and types from serving.kserve.io v1alpha1/v1beta1), and every embedded
Kubernetes type (a Container, ResourceRequirements, ...) is checked with kubernetes-validate's
schema for it, inside a Pod.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonschema
import kubernetes_validate

# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest the
# validator knows.
KUBERNETES_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version())

BUILT_IN_API_VERSIONS = {"v1", "apps/v1", "autoscaling/v2", "policy/v1", "networking.k8s.io/v1"}


def closed(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


@functools.cache
def service_monitor_schema() -> dict:
    from cloudcoil.models.prometheus_operator import v1

    return closed(v1.ServiceMonitor.model_json_schema(by_alias=True))


_OBJECT_META = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
# Embedded Kubernetes types (checked by kubernetes-validate through embedded_core_objects), or
# KServe types no manifest here uses.
_ANY_OBJECT = {"type": "object"}
_ANY_ARRAY = {"type": "array", "items": {"type": "object"}}

KSERVE_SCHEMAS: dict[tuple[str, str], dict] = {
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "serving.kserve.io/v1alpha1"},
            "kind": {"const": "ClusterServingRuntime"},
            "metadata": _OBJECT_META,
            "spec": {
                "type": "object",
                "required": ["containers"],
                "properties": {
                    "supportedModelFormats": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string"},
                                "version": {"type": "string"},
                                "autoSelect": {"type": "boolean"},
                                "priority": {"type": "integer", "minimum": 1},
                            },
                        },
                    },
                    "protocolVersions": {"type": "array", "items": {"enum": ["v1", "v2", "grpc-v1", "grpc-v2"]}},
                    "multiModel": {"type": "boolean"},
                    "disabled": {"type": "boolean"},
                    "grpcEndpoint": {"type": "string"},
                    "grpcDataEndpoint": {"type": "string"},
                    "httpDataEndpoint": {"type": "string"},
                    "hostIPC": {"type": "boolean"},
                    "replicas": {"type": "integer"},
                    "schedulerName": {"type": "string"},
                    "annotations": _STRING_MAP,
                    "labels": _STRING_MAP,
                    "nodeSelector": _STRING_MAP,
                    "storageHelper": {"type": "object", "properties": {"disabled": {"type": "boolean"}}},
                    "containers": {"type": "array", "minItems": 1, "items": _ANY_OBJECT},
                    "volumes": _ANY_ARRAY,
                    "tolerations": _ANY_ARRAY,
                    "imagePullSecrets": _ANY_ARRAY,
                    "resourceClaims": _ANY_ARRAY,
                    "affinity": _ANY_OBJECT,
                    "builtInAdapter": _ANY_OBJECT,
                    "workerSpec": _ANY_OBJECT,
                },
            },
        },
    },
    ("serving.kserve.io/v1beta1", "InferenceService"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "serving.kserve.io/v1beta1"},
            "kind": {"const": "InferenceService"},
            "metadata": _OBJECT_META,
            "spec": {
                "type": "object",
                "required": ["predictor"],
                "properties": {
                    "predictor": {
                        "type": "object",
                        # The predictor is a PodSpec plus these KServe fields; this example
                        # uses only those and the model.
                        "properties": {
                            "minReplicas": {"type": "integer", "minimum": 0},
                            "maxReplicas": {"type": "integer", "minimum": 0},
                            "scaleMetric": {"enum": ["cpu", "memory", "concurrency", "rps"]},
                            "scaleMetricType": {"enum": ["Utilization", "Value", "AverageValue"]},
                            "scaleTarget": {"type": "integer"},
                            "containerConcurrency": {"type": "integer"},
                            "timeout": {"type": "integer"},
                            "serviceAccountName": {"type": "string"},
                            "model": {
                                "type": "object",
                                "required": ["modelFormat"],
                                # The model is a Container plus these KServe fields.
                                "properties": {
                                    "modelFormat": {
                                        "type": "object",
                                        "required": ["name"],
                                        "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
                                    },
                                    "runtime": {"type": "string"},
                                    "runtimeVersion": {"type": "string"},
                                    "protocolVersion": {"enum": ["v1", "v2", "grpc-v1", "grpc-v2"]},
                                    "storageUri": {"type": "string"},
                                },
                                "additionalProperties": True,
                            },
                        },
                    },
                },
            },
        },
    },
}
KSERVE_MODEL_FIELDS = ("modelFormat", "runtime", "runtimeVersion", "protocolVersion", "storageUri")


def embedded_core_objects(obj: dict) -> list[dict]:
    """Pods wrapping the Kubernetes types a KServe object embeds, for kubernetes-validate."""
    spec = obj["spec"]
    if obj["kind"] == "ClusterServingRuntime":
        pod = {"containers": spec["containers"]}
        for key in ("volumes", "tolerations", "imagePullSecrets", "affinity", "nodeSelector"):
            if key in spec:
                pod[key] = spec[key]
        return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runtime"}, "spec": pod}]
    model = {k: v for k, v in spec["predictor"]["model"].items() if k not in KSERVE_MODEL_FIELDS}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "predictor"},
            "spec": {"containers": [{"name": "kserve-container", "image": "runtime", **model}]},
        }
    ]


def validate(obj: dict) -> None:
    """Raises with the object's kind and the first problem when obj breaks its schema."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version in BUILT_IN_API_VERSIONS:
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)
    elif (api_version, kind) == ("monitoring.coreos.com/v1", "ServiceMonitor"):
        jsonschema.validate(obj, service_monitor_schema())
    elif (api_version, kind) in KSERVE_SCHEMAS:
        jsonschema.validate(obj, closed(KSERVE_SCHEMAS[api_version, kind]))
        for pod in embedded_core_objects(obj):
            validate(pod)
    else:
        raise AssertionError(f"no schema for {api_version} {kind}")
