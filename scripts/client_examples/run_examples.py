"""Runs Triton's Python client examples, unchanged, against naiad serving our equivalents of the
models they expect; prints one PASS/FAIL/SKIP line per example and a final count.

Usage: python run_examples.py EXAMPLES_DIR [NAIAD]
  EXAMPLES_DIR  src/python/examples of a checkout of triton-inference-server/client
  NAIAD         the naiad command (default: naiad beside this Python)

naiad listens on the examples' default ports, 127.0.0.1:8000 (HTTP), 8001 (gRPC) and 8002
(metrics): memory_growth_test.py cannot be told another address. Each example runs with every
invocation listed below (both protocols, the dynamic-sequence variants, the image clients' modes)
and passes when every invocation exits 0 without a traceback.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from build_repositories import build

PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
EXAMPLE_TIMEOUT_S = 180
NEEDS_GPU = "needs a GPU (CUDA shared memory); no nvidia-smi here"

# Arguments of each invocation; IMAGE and IMAGES are replaced by the generated image files.
GRPC = ["-u", "localhost:8001"]
INVOCATIONS: dict[str, list[list[str]]] = {
    "ensemble_image_client.py": [["IMAGES"], ["-i", "grpc", *GRPC, "-c", "2", "IMAGES"]],
    "grpc_image_client.py": [
        ["-m", "densenet_onnx", "-s", "INCEPTION", "-c", "1", "IMAGE"],
        ["-m", "densenet_onnx", "-s", "INCEPTION", "-a", "-c", "3", "IMAGE"],
    ],
    "image_client.py": [
        ["-m", "densenet_onnx", "-s", "INCEPTION", "-c", "1", "-b", "1", "IMAGE"],
        ["-m", "densenet_onnx", "-s", "INCEPTION", "-a", "-c", "2", "IMAGE"],
        ["-m", "densenet_onnx", "-s", "INCEPTION", "-i", "grpc", *GRPC, "-c", "1", "IMAGE"],
        ["-m", "densenet_onnx", "-s", "INCEPTION", "-i", "grpc", *GRPC, "-a", "--streaming", "IMAGE"],
    ],
    "memory_growth_test.py": [[], ["-i", "grpc"]],
    "reuse_infer_objects_client.py": [["-i", "http", "-u", "localhost:8000"], ["-i", "grpc", *GRPC]],
    "simple_grpc_infer_client.py": [[], ["-C", "deflate"]],
    "simple_grpc_aio_sequence_stream_infer_client.py": [[], ["-d"]],
    "simple_grpc_sequence_stream_infer_client.py": [[], ["-d"]],
    "simple_grpc_sequence_sync_infer_client.py": [[], ["-d"]],
    "simple_http_sequence_sync_infer_client.py": [[], ["-d"]],
}
# Triton's QA runs these in explicit model-control mode on repositories of eight models (gRPC) and
# seven (HTTP): each example checks that count in the repository index.
GRPC_MODEL_CONTROL, HTTP_MODEL_CONTROL = "simple_grpc_model_control.py", "simple_http_model_control.py"
CUDA_SHM = ("simple_grpc_cudashm_client.py", "simple_http_cudashm_client.py")


@dataclass
class Outcome:
    status: str  # PASS, FAIL or SKIP
    reason: str = ""


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def client_shm_flag(naiad: list[str]) -> list[str]:
    """Client shared memory is opt-in where naiad has the flag (Triton's since 26.04); the shm
    examples need it, as Triton's QA starts its server with it."""
    usage = subprocess.run([*naiad, "serve", "--help"], capture_output=True, text=True).stdout
    return ["--allow-client-shm", "true"] if "--allow-client-shm" in usage else []


def start_naiad(naiad: list[str], repositories: list[Path], extra: list[str], log: Path) -> subprocess.Popen:
    command = [*naiad, "serve"]
    for repository in repositories:
        command += ["--model-repository", str(repository)]
    for kind, port in PORTS.items():
        command += [f"--{kind}-address", "127.0.0.1", f"--{kind}-port", str(port)]
    server = subprocess.Popen(command + extra, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"naiad exited with {server.returncode}; the end of its log ({log}):\n{log_tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORTS['http']}/v2/health/ready", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(0.5)
    stop(server)
    sys.exit(f"naiad did not become ready in 120 s; the end of its log ({log}):\n{log_tail(log)}")


def log_tail(log: Path, lines: int = 40) -> str:
    """What a machine whose files do not come back (the GPU check's) needs to see."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def run_example(script: Path, invocations: list[list[str]], images: Path, log: Path) -> Outcome:
    substitutions = {"IMAGE": str(images / "gradient.jpg"), "IMAGES": str(images)}
    with log.open("w") as out:
        for arguments in invocations:
            arguments = [substitutions.get(a, a) for a in arguments]
            out.write(f"$ {script.name} {' '.join(arguments)}\n")
            out.flush()
            try:
                done = subprocess.run(
                    [sys.executable, str(script), *arguments],
                    cwd=script.parent,
                    timeout=EXAMPLE_TIMEOUT_S,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            except subprocess.TimeoutExpired:
                return Outcome(
                    "FAIL", f"{' '.join(arguments) or 'no arguments'}: timed out after {EXAMPLE_TIMEOUT_S} s"
                )
            out.write(done.stdout + "\n")
            if done.returncode != 0 or "Traceback" in done.stdout:
                last = done.stdout.strip().splitlines()[-1:] or [""]
                return Outcome(
                    "FAIL", f"{' '.join(arguments) or 'no arguments'}: exit {done.returncode}: {last[0][:200]}"
                )
    return Outcome("PASS")


def main() -> int:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    examples = Path(sys.argv[1]).resolve()
    naiad = [sys.argv[2]] if len(sys.argv) == 3 else [str(Path(sys.executable).with_name("naiad"))]
    scripts = sorted(examples.glob("*.py"))
    if not scripts:
        sys.exit(f"no examples (*.py) in {examples}")
    busy = [str(p) for p in PORTS.values() if not port_is_free(p)]
    if busy:
        sys.exit(f"port(s) {', '.join(busy)} already in use on 127.0.0.1: the examples expect naiad there")

    work = Path(tempfile.mkdtemp(prefix="naiad-client-examples-"))
    build(work)
    outcomes: dict[str, Outcome] = {}
    seven_models = work / "seven_models"
    shutil.copytree(work / "models", seven_models)
    shutil.rmtree(seven_models / "densenet_onnx")
    explicit = ["--model-control-mode", "explicit"]
    shm = client_shm_flag(naiad)
    model_control = (GRPC_MODEL_CONTROL, HTTP_MODEL_CONTROL)
    phases = [
        # Every other example, against both repositories in naiad's default mode.
        ([work / "models", work / "more_models"], shm, [s for s in scripts if s.name not in model_control]),
        ([work / "models"], explicit, [s for s in scripts if s.name == GRPC_MODEL_CONTROL]),
        ([seven_models], explicit, [s for s in scripts if s.name == HTTP_MODEL_CONTROL]),
    ]
    skipped = {} if shutil.which("nvidia-smi") else {name: NEEDS_GPU for name in CUDA_SHM}
    for index, (repositories, extra, selected) in enumerate(phases):
        if not selected:
            continue
        server = start_naiad(naiad, repositories, extra, work / f"naiad-{index}.log")
        try:
            for script in selected:
                if script.name in skipped:
                    outcome = Outcome("SKIP", skipped[script.name])
                else:
                    invocations = INVOCATIONS.get(script.name, [[]])
                    outcome = run_example(script, invocations, work / "images", work / f"{script.stem}.log")
                outcomes[script.name] = outcome
                print(f"{outcome.status} {script.name}" + (f": {outcome.reason}" if outcome.reason else ""), flush=True)
        finally:
            stop(server)

    counts = {s: sum(o.status == s for o in outcomes.values()) for s in ("PASS", "FAIL", "SKIP")}
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped of {len(outcomes)} examples")
    print(f"logs: {work}")
    if counts["FAIL"] == 0:
        for repository in ("models", "more_models", "seven_models"):
            shutil.rmtree(work / repository)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
