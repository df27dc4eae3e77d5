"""scripts/gpu-check.sh on a machine without a GPU: it says so at once, writes its summary
to $OUT and exits 3, so a device call that lands on the wrong machine costs seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_gpu_the_check_says_so_and_stops(tmp_path):
    # A PATH without nvidia-smi, even on a machine that has one.
    path = os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvidia-smi").exists()
    )
    assert shutil.which("nvidia-smi", path=path) is None
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh")],
        env={**os.environ, "PATH": path, "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "no GPU: nvidia-smi is not installed on this machine" in result.stdout
    summary = (out / "summary.md").read_text()
    assert "- outcome: no GPU: nothing was checked" in summary
    assert "- GPU: none found" in summary
    assert "no GPU: nvidia-smi is not installed" in (out / "gpu-check.log").read_text()
