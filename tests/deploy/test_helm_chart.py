"""deploy/helm/naiad, rendered by Helm itself (its Go library, from the helm-python-sdk
package) and every object validated against the Kubernetes schemas (kubernetes-validate)
or its CRD's schema (issue 19, item 2)."""

from pathlib import Path

import pytest
import yaml
from k8s_schemas import validate

from naiad.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "naiad"
helm = pytest.importorskip("helm_python")

FULL = {
    "modelRepository": {
        "uri": "s3://models/repository",
        "credentials": {"envSecret": "s3-credentials", "gcsKeySecret": {"name": "gcs-key"}},
    },
    "gpu": {"count": 2},
    "image": {"variant": "cuda"},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    "autoscaling": {"enabled": True},
    "extraArgs": ["--model-control-mode=poll", "--repository-poll-secs=30"],
    "nodeSelector": {"nvidia.com/gpu.present": "true"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def render(values: dict | None = None) -> dict[str, dict]:
    manifests = helm.Chart.load(CHART).render(values=values or {}, name="prod", namespace="ml")
    objects = [
        doc for path, text in manifests.items() if path.endswith(".yaml") for doc in yaml.safe_load_all(text) if doc
    ]
    by_kind = {obj["kind"]: obj for obj in objects}
    assert len(by_kind) == len(objects), "two objects of one kind"
    return by_kind


def container(objects: dict[str, dict]) -> dict:
    (naiad,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    return naiad


def test_chart_lints_clean():
    report = helm.lint(CHART, strict=True)
    assert report["errors"] == []
    # Severity 2 and 3 are warnings and errors; "icon is recommended" is information.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", [{}, FULL], ids=["defaults", "everything-on"])
def test_every_object_matches_its_schema(values):
    objects = render(values)
    for obj in objects.values():
        validate(obj)
    expected = {"Deployment", "Service", "ServiceAccount"}
    if values:
        expected |= {"ServiceMonitor", "HorizontalPodAutoscaler"}
    assert set(objects) == expected


def test_a_broken_object_is_caught():
    """The validators reject what Kubernetes would: a misspelled field, a wrong type."""
    objects = render(FULL)
    deployment = objects["Deployment"]
    container(objects)["readinesProbe"] = container(objects).pop("readinessProbe")
    with pytest.raises(Exception, match="readinesProbe"):
        validate(deployment)
    monitor = objects["ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["intervall"] = monitor["spec"]["endpoints"][0].pop("interval")
    with pytest.raises(Exception, match="intervall"):
        validate(monitor)


def test_probes_ports_and_service_agree():
    objects = render()
    naiad = container(objects)
    ports = {p["name"]: p["containerPort"] for p in naiad["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    assert naiad["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert naiad["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    service = objects["Service"]["spec"]
    assert {p["name"]: p["targetPort"] for p in service["ports"]} == {n: n for n in ports}
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= pod_labels.items()
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    # Without a URI the repository is the volume at /models.
    assert "--model-repository=/models" in naiad["args"]
    assert {"name": "models", "mountPath": "/models"} in naiad["volumeMounts"]


def test_arguments_are_naiad_serve_flags():
    for values in ({}, FULL):
        args = build_parser().parse_args(["serve", *container(render(values))["args"]])
        assert args.http_port == 8000 and args.grpc_port == 8001 and args.metrics_port == 8002
    assert args.model_repository == ["s3://models/repository"] and args.model_control_mode == "poll"


def test_repository_volume_and_credentials():
    objects = render({"modelRepository": {"volume": {"persistentVolumeClaim": {"claimName": "models"}}}})
    volumes = {v["name"]: v for v in objects["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "models"}

    objects = render(FULL)
    naiad = container(objects)
    assert naiad["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    assert {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/var/run/secrets/naiad/gcs/key.json"} in naiad["env"]
    volumes = {v["name"]: v for v in objects["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert "models" not in volumes and volumes["gcs-key"]["secret"]["secretName"] == "gcs-key"


def test_gpus_are_requested_as_an_option():
    assert "nvidia.com/gpu" not in container(render())["resources"].get("limits", {})
    naiad = container(render(FULL))
    assert naiad["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert naiad["resources"]["limits"]["memory"] == "4Gi"  # the other limits stay
    assert naiad["image"] == "naiad:0.1.0-cuda"


def test_service_monitor_scrapes_the_metrics_port():
    objects = render(FULL)
    monitor = objects["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= objects["Service"]["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]


def test_autoscaler_follows_the_adapter_metric():
    objects = render(FULL)
    hpa = objects["HorizontalPodAutoscaler"]["spec"]
    assert "replicas" not in objects["Deployment"]["spec"]  # the autoscaler owns the count
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": objects["Deployment"]["metadata"]["name"],
    }
    (metric,) = hpa["metrics"]
    assert metric["type"] == "Pods" and metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "4"}
    adapter = yaml.safe_load((DEPLOY / "helm" / "prometheus-adapter-values.yaml").read_text())
    served = {rule["name"]["as"]: rule["seriesQuery"] for rule in adapter["rules"]["custom"]}
    # The HPA asks for a metric the adapter serves, from Triton's queue gauge.
    assert served[metric["pods"]["metric"]["name"]].startswith("nv_inference_pending_request_count{")
