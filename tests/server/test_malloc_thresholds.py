"""`naiad serve` raises glibc's malloc thresholds (naiad/malloc_thresholds.py) in every process
of the server, so a block of a few MiB allocated and freed again and again (a framework's
tensors, batch after batch) is reused from the heap instead of being mapped and faulted in
afresh each time; a user's own malloc settings, and `--raise-malloc-thresholds false`, leave
glibc as it is. Measured with the kernel's count of a process's page faults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.malloc_thresholds import MMAP_THRESHOLD, TRIM_THRESHOLD, is_glibc, raise_malloc_thresholds
from naiad.testing import ServerProcess

pytestmark = pytest.mark.skipif(not is_glibc(), reason="glibc's malloc thresholds: this C library is not glibc")

# Page faults while three blocks of 3 MiB of floats are allocated, written and freed, 20
# times, after one round that lets the heap grow. With glibc's adaptive thresholds the free
# space at the top of the heap (9 MiB) exceeds the trim threshold (twice the largest block
# freed), so every round hands it back and faults it in again: about 2,300 faults a round.
# (numpy asks for huge pages from 4 MiB on, which would hide the difference.)
FAULTS_OF_REUSE = """
import resource
import numpy as np

def faults_of_reuse():
    def round_of_blocks():
        blocks = [np.ones(3 << 18, dtype=np.float32) for _ in range(3)]
        del blocks

    round_of_blocks()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        round_of_blocks()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""

MODEL = (
    FAULTS_OF_REUSE
    + """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("FAULTS", np.array([faults_of_reuse()], dtype=np.int64))])
            for _ in requests
        ]
"""
)
CONFIG = """name: "faults"
backend: "python"
max_batch_size: 0
input [{name: "INPUT0" data_type: TYPE_INT32 dims: [1]}]
output [{name: "FAULTS" data_type: TYPE_INT64 dims: [1]}]
"""


def _is_malloc_setting(name: str) -> bool:
    return name.startswith("MALLOC_") or name == "GLIBC_TUNABLES"


def _environment_without_malloc_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not _is_malloc_setting(k)}


COUNT = FAULTS_OF_REUSE + "print(faults_of_reuse())\n"
RAISE = "from naiad.malloc_thresholds import raise_malloc_thresholds\nraise_malloc_thresholds()\n"


def _faults(script: str, env: dict[str, str]) -> int:
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_raised_thresholds_end_the_page_faults_of_reused_blocks_here_and_in_processes_started_after():
    env = _environment_without_malloc_settings()
    default = _faults(COUNT, env)
    raised = _faults(RAISE + COUNT, env)
    # A process started after the raise (as the server starts its model processes) has them too.
    in_a_child = _faults(
        RAISE + f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {COUNT!r}], check=True)\n", env
    )
    assert default > 10_000, f"glibc's defaults should map every round's blocks afresh: {default} faults"
    assert raised < default / 10, (raised, default)
    assert in_a_child < default / 10, (in_a_child, default)


def test_the_thresholds_go_to_the_environment_of_the_processes_started_later():
    environ = _environment_without_malloc_settings()
    code = (
        "import os, sys\n"
        "from naiad.malloc_thresholds import raise_malloc_thresholds\n"
        "assert raise_malloc_thresholds()\n"
        "print(os.environ['MALLOC_MMAP_THRESHOLD_'], os.environ['MALLOC_TRIM_THRESHOLD_'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(MMAP_THRESHOLD), str(TRIM_THRESHOLD)]


@pytest.mark.parametrize(
    "setting",
    [
        {"MALLOC_TRIM_THRESHOLD_": "131072"},
        {"MALLOC_MMAP_THRESHOLD_": "65536"},
        {"MALLOC_TOP_PAD_": "0"},
        {"MALLOC_MMAP_MAX_": "0"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"},
    ],
)
def test_a_users_own_malloc_setting_is_left_as_it_is(setting):
    environ = dict(setting)
    assert raise_malloc_thresholds(environ) is False
    assert environ == setting


def _serve_and_count_faults(tmp_path: Path, *flags: str) -> int:
    version = tmp_path / "faults" / "1"
    version.mkdir(parents=True, exist_ok=True)
    (version / "model.py").write_text(MODEL)
    (tmp_path / "faults" / "config.pbtxt").write_text(CONFIG)
    with ServerProcess(tmp_path, *flags) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        request = httpclient.InferInput("INPUT0", [1], "INT32")
        request.set_data_from_numpy(np.zeros(1, dtype=np.int32))
        return int(client.infer("faults", [request]).as_numpy("FAULTS")[0])


def test_a_model_process_of_naiad_serve_reuses_its_blocks_unless_told_not_to(tmp_path, monkeypatch):
    for name in filter(_is_malloc_setting, list(os.environ)):
        monkeypatch.delenv(name)
    raised = _serve_and_count_faults(tmp_path / "raised")
    default = _serve_and_count_faults(tmp_path / "default", "--raise-malloc-thresholds", "false")
    assert default > 10_000, f"glibc's defaults should map every round's blocks afresh: {default} faults"
    assert raised < default / 10, (raised, default)
