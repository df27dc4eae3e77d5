"""docs/python-models.md: its app file serves as the page says (tritonclient gets the
doubled tensor), and its embedded program prints what the page says it prints. Both are read
from the page, so the page cannot drift from what works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-models.md"
BLOCK = re.compile(r"<!-- (file|output): (\S+) -->\n```[a-z]*\n(.*?)```", re.S)


def blocks(kind: str) -> dict[str, str]:
    return {name: body for found, name, body in BLOCK.findall(DOC.read_text()) if found == kind}


def test_the_pages_app_file_serves(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(blocks("file")["app.py"])
    with ServerProcess(str(app)) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        x = httpclient.InferInput("x", [2, 4], "FP32")
        x.set_data_from_numpy(np.arange(8, dtype=np.float32).reshape(2, 4))
        assert client.infer("double", [x]).as_numpy("y").tolist() == [[0, 2, 4, 6], [8, 10, 12, 14]]


def test_the_embedded_program_prints_what_the_page_says(tmp_path):
    program = tmp_path / "embedded_double.py"
    program.write_text(blocks("file")["embedded_double.py"])
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == blocks("output")["embedded_double.py"]
