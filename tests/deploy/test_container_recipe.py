"""deploy/container/Dockerfile: its structure, read as Docker reads it (there is no container
engine here; deploy/container/prove-install.sh runs its install steps in a clean venv)."""

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

CONTAINER = Path(__file__).resolve().parents[2] / "deploy" / "container"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
    joined = re.sub(
        r"\\\n(\s*#.*\n)*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    )
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in joined.splitlines() if line.strip()
    ]


@pytest.fixture(scope="module")
def recipe():
    return instructions((CONTAINER / "Dockerfile").read_text())


def stages(recipe):
    """The instructions of each stage, by stage name; global ARGs under None."""
    result, name = {None: []}, None
    for op, args in recipe:
        if op == "FROM":
            name = args.split(" AS ")[1].strip() if " AS " in args else args
            result[name] = []
        result[name].append((op, args))
    return result


def args_of(instrs, op):
    return [a for o, a in instrs if o == op]


def test_multi_stage_on_a_pinned_base(recipe):
    by_stage = stages(recipe)
    assert list(by_stage)[1:] == ["build", "runtime"]
    base = dict(a.split("=", 1) for a in args_of(by_stage[None], "ARG"))["BASE_IMAGE"]
    # An exact release (python:X.Y.Z-...) or a digest: never a moving tag such as latest or 3.11.
    assert re.fullmatch(r"[\w./-]+(:\d+\.\d+\.\d+[\w.-]*)?(@sha256:[0-9a-f]{64})?", base), base
    assert re.search(r":\d+\.\d+\.\d+|@sha256:", base), base
    froms = args_of(recipe, "FROM")
    assert froms == ["${BASE_IMAGE} AS build", "${BASE_IMAGE} AS runtime"]
    runtime = by_stage["runtime"]
    assert any(a.startswith("--from=build /wheels") for a in args_of(runtime, "COPY"))
    # The runtime stage gets wheels, not the source tree.
    assert not any(a.split()[0] == "." for a in args_of(runtime, "COPY"))


def test_runs_as_a_non_root_user(recipe):
    runtime = stages(recipe)["runtime"]
    users = args_of(runtime, "USER")
    assert users, "the runtime stage sets no USER"
    user = users[-1].split(":")[0]
    # Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
    assert user.isdigit() and int(user) != 0
    # The user is created in the stage before USER switches to it.
    assert any(f"--uid {user}" in a for a in args_of(runtime, "RUN"))


def test_ports_entrypoint_and_default_command(recipe):
    runtime = stages(recipe)["runtime"]
    assert sorted(" ".join(args_of(runtime, "EXPOSE")).split()) == ["8000", "8001", "8002"]
    assert json.loads(args_of(runtime, "ENTRYPOINT")[-1]) == ["naiad", "serve"]
    assert json.loads(args_of(runtime, "CMD")[-1]) == ["--model-repository", "/models"]


def test_healthcheck_asks_the_health_endpoint(recipe):
    (check,) = args_of(stages(recipe)["runtime"], "HEALTHCHECK")
    options, command = check.split(" CMD ", 1)
    assert "--interval=" in options and "--timeout=" in options
    argv = json.loads(command)
    assert argv[0] == "python"
    assert re.search(r"http://127\.0\.0\.1:8000/v2/health/(ready|live)", argv[-1])


def test_variants_are_build_arguments_of_one_install_script(recipe):
    runtime = stages(recipe)["runtime"]
    arg_defaults = dict(a.split("=", 1) for a in args_of(runtime, "ARG"))
    assert arg_defaults["VARIANT"] == "cpu"
    assert set(shlex.split(arg_defaults["BACKENDS"])[0].split()) >= {"python", "onnx"}
    (install,) = [a for a in args_of(runtime, "RUN") if "install.sh" in a]
    assert '/tmp/install.sh /tmp/wheels /opt/naiad "${VARIANT}" ${BACKENDS}' in install
    assert "deploy/container/install.sh /tmp/install.sh" in args_of(runtime, "COPY")
    # The build stage builds the wheels with the repository's own script.
    assert "bash scripts/build-wheels.sh /wheels" in args_of(stages(recipe)["build"], "RUN")


@pytest.mark.parametrize(
    "args, message",
    [
        (["w", "p"], "usage:"),
        (["w", "p", "gpu", "onnx"], "VARIANT is cpu or cuda, not gpu"),
    ],
)
def test_install_script_refuses_bad_arguments(tmp_path, args, message):
    result = subprocess.run(["sh", str(CONTAINER / "install.sh"), *args], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr
    assert list(tmp_path.iterdir()) == []  # refused before creating anything


def test_scripts_parse():
    for script, shell in [("install.sh", "sh"), ("prove-install.sh", "bash")]:
        result = subprocess.run([shell, "-n", str(CONTAINER / script)], capture_output=True, text=True)
        assert result.returncode == 0 and result.stderr == "", (script, result.stderr)


def test_deployment_doc_states_the_build_arguments(recipe):
    """docs/deployment.md's table of build arguments says what the Dockerfile's defaults are."""
    doc = (CONTAINER.parents[1] / "docs" / "deployment.md").read_text()
    documented = dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", doc, re.M))
    defaults = {}
    for name_value in args_of(recipe, "ARG"):
        name, value = name_value.split("=", 1)
        defaults[name] = value.strip('"')
    assert documented == defaults


def test_image_and_checkout_pin_one_torch_release():
    """The image's CPU torch is the release scripts/setup.sh tests with."""
    pin = re.compile(r'"(torch==[\d.]+\+cpu)"')
    setup = (CONTAINER.parents[1] / "scripts" / "setup.sh").read_text()
    assert pin.findall((CONTAINER / "install.sh").read_text()) == pin.findall(setup)[:1] != []
