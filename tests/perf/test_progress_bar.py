"""`naiad perf`'s progress bar: drawn on stderr when stderr is a terminal, never otherwise
(the command-line tests run with pipes and see an empty stderr)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading

from perf_servers import QUICK, table_rows


def test_the_bar_is_drawn_on_a_terminal(server):
    controller, terminal = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:  # the terminal side closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    process = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "perf", "-m", "add_sub", "-u", server.http_url, *QUICK],
        stdout=subprocess.PIPE,
        stderr=terminal,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
        timeout=120,
        text=True,
    )
    os.close(terminal)
    reader.join(timeout=10)
    os.close(controller)
    drawn = b"".join(chunks).decode(errors="replace")
    assert process.returncode == 0
    assert "step 1/1 concurrency 1" in drawn
    assert "infer/s" in drawn  # a window's figures beside the bar
    # What the command prints still goes to stdout, whole, and none of it to the terminal.
    assert process.stdout.splitlines()[1] == "Request concurrency: 1"
    assert table_rows(process.stdout)[0]["Concurrency"] == "1"
    assert "Request concurrency" not in drawn
