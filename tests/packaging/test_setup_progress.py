"""scripts/setup.sh says what it is doing: a line per step on stderr, with the seconds so far,
where pip runs quietly for minutes (issue 37, item 5). Run on a copy of the checkout, in the
serve mode, as pure Python (the quickest real set-up: about a minute, most of it pip), so it
runs in CI (CI=true) or when NAIAD_TEST_PACKAGING=1, and is skipped otherwise."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from distributions import ROOT

pytestmark = [
    pytest.mark.packaging,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("CI", "").lower() != "true" and os.environ.get("NAIAD_TEST_PACKAGING") != "1",
        reason="makes a new environment (~1 min): runs in CI or with NAIAD_TEST_PACKAGING=1",
    ),
]

STEP = re.compile(r"^setup\.sh \[ *\d+ s\] (.*)$", re.MULTILINE)
# What a copy needs of the checkout: not its environment, build output or history.
LEFT_OUT = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.so", "build", "dist", "*.egg-info", "node_modules")


def steps(checkout, env) -> list[str]:
    run = subprocess.run(
        ["bash", "scripts/setup.sh", "serve"], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    return STEP.findall(run.stderr)


def test_setup_prints_a_line_per_step(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=LEFT_OUT)
    env = {**os.environ, "NAIAD_PURE_PYTHON": "1", "PYTHON": sys.executable}
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert steps(checkout, env) == [
        f"creating .venv with Python {version} and upgrading pip",
        "installing, editable: naiad wire + backends python onnx + onnx, swagger-ui-bundle "
        "(naiad, naiad-wire and the Python backend as pure Python: NAIAD_PURE_PYTHON=1)",
        "done: .venv is ready for 'serve'",
    ]
    assert steps(checkout, env) == [".venv is up to date for 'serve': nothing to install"]
