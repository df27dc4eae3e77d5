"""The repository names no directory of a particular machine: tests, scripts and docs refer to
files relative to the checkout (`../shared/` for the shared benchmark)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Home and workspace directories of the machines naiad is developed on, and the benchmark's
# tool directory: none of them exists on a user's machine.
MACHINE_PATH = re.compile(r"(?<![\w.])/(work|root|home/\w+|tmp/anchors)/")


def test_no_file_names_a_machine_specific_path():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in files:
        if name == "tests/docs/test_no_machine_paths.py":
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        offenders += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if MACHINE_PATH.search(line)]
    assert offenders == []
