"""The models `naiad perf`'s tests load, and the command run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from numpy_backend import SEQUENCE_CONTROLS

# The header line perf_analyzer's report_writer.cc writes with --verbose-csv (server
# statistics included, no response cache, not stabilising on a percentile).
PERF_ANALYZER_CSV_HEADER = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
    "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,"
    "Avg latency,request/response,response wait"
)

# Short windows: each step is over in about a second.
QUICK = ("-p", "300", "-r", "4", "-s", "100")


def models(log_dir: Path) -> dict[str, str]:
    return {
        "add_sub": """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}
dynamic_batching {}""",
        "variable": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
        # Every execution's first request's inputs go to a log the test reads.
        "logged": f"""backend: "numpy" max_batch_size: 0
input [{{name:"INPUT0" data_type: TYPE_INT32 dims:[3]}}, {{name:"INPUT1" data_type: TYPE_STRING dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_INT32 dims:[3]}}, {{name:"OUTPUT1" data_type: TYPE_STRING dims:[1]}}]
parameters {{key:"execution_log" value {{string_value:"{log_dir / "logged.jsonl"}"}}}}""",
        "sequence": f"""backend: "numpy" max_batch_size: 4
input [{{name:"INPUT" data_type: TYPE_INT32 dims:[1]}}]
output [{{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}}, {{name:"CONTROLS" data_type: TYPE_INT32 dims:[3]}},
        {{name:"CORRID_OUT" data_type: TYPE_UINT64 dims:[1]}}]
parameters [{{key:"op" value {{string_value:"accumulate"}}}},
            {{key:"execution_log" value {{string_value:"{log_dir / "sequence.jsonl"}"}}}}]
sequence_batching {{ direct {{ }} {SEQUENCE_CONTROLS % "TYPE_UINT64"} }}""",
        "failing": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
parameters {key:"op" value {string_value:"fail"}}""",
    }


def naiad_perf(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "naiad.cli", "perf", *args], capture_output=True, text=True, timeout=timeout
    )


def table_rows(stdout: str) -> list[dict[str, str]]:
    """The summary table's rows, by column name."""
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[1:]]
