"""docs/embedding.md: each example program runs and prints what the page says it prints.
The programs are read from the page (each fenced block after `<!-- file: NAME -->`), so the
documentation cannot drift from what works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"
BLOCK = re.compile(r"<!-- (file|output): (\S+) -->\n```[a-z]*\n(.*?)```", re.S)


def blocks(kind: str) -> dict[str, str]:
    return {name: body for found, name, body in BLOCK.findall(DOC.read_text()) if found == kind}


def test_every_program_has_its_output():
    assert set(blocks("file")) == set(blocks("output")) == {"embed.py", "own_backend.py", "asgi.py"}


@pytest.mark.parametrize("name", sorted(blocks("file")))
def test_example_prints_what_the_page_says(tmp_path, name):
    if name in ("embed.py", "asgi.py"):
        pytest.importorskip("naiad_backend_python")
    program = tmp_path / name
    program.write_text(blocks("file")[name])
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == blocks("output")[name]
