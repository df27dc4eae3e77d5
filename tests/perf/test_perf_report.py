"""What `naiad perf` prints for a step whose figures are given: the client-bound warning, an
unstable step's warning, and perf_analyzer's CSV row arithmetic."""

from __future__ import annotations

import csv

from perf_servers import PERF_ANALYZER_CSV_HEADER

from naiad.cli.perf_report import step_text
from naiad.loadgen import ClientTimes, ServerBreakdown, StepResult
from naiad.loadgen.csv_report import write_csv_report


def step(**changes: object) -> StepResult:
    values: dict[str, object] = {
        "concurrency": 8,
        "request_rate": None,
        "throughput": 4000.0,
        "latency_us": {"avg": 2000.0, "p50": 1900.0, "p90": 2500.0, "p95": 2700.0, "p99": 3100.0},
        "server": ServerBreakdown(
            queue_us=300.0,
            compute_input_us=20.0,
            compute_infer_us=900.0,
            compute_output_us=30.0,
            overhead_us=50.0,
            requests=12000,
            executions=3000,
        ),  # fmt: skip
        "client_cpu": 0.2,
        "client_bound": False,
        "stable": True,
        "errors": 0,
        "requests": 12000,
        "client": ClientTimes(send_us=10.0, recv_us=15.0),
        "windows": 3,
    }
    values.update(changes)
    return StepResult(**values)  # type: ignore[arg-type]


def test_a_client_near_a_whole_core_is_warned_about():
    quiet = step_text(step())
    assert "warning" not in quiet
    assert "    Client CPU: 20% of one core" in quiet.splitlines()
    busy = step_text(step(client_cpu=0.97, client_bound=True)).splitlines()
    assert busy[-1] == (
        "  warning: the client used 97% of a CPU core: it may be the bottleneck, not the server "
        "(run it on another machine, or give it a core of its own)"
    )


def test_an_unstable_step_says_so():
    lines = step_text(step(stable=False, windows=10)).splitlines()
    assert lines[-1].startswith("  warning: not stable after 10 windows")


def test_server_line_adds_up_as_perf_analyzers_does():
    lines = step_text(step()).splitlines()
    expected = (
        "    Avg request latency: 1300 usec (overhead 50 usec + queue 300 usec + compute input 20 usec + "
        "compute infer 900 usec + compute output 30 usec)"
    )
    assert expected in lines


def test_csv_row_arithmetic(tmp_path):
    path = tmp_path / "steps.csv"
    write_csv_report(str(path), [step(), step(concurrency=1, throughput=1000.0)], None)
    with path.open(newline="") as file:
        assert file.readline().rstrip("\n") == PERF_ANALYZER_CSV_HEADER
        file.seek(0)
        rows = list(csv.DictReader(file))
    assert [row["Concurrency"] for row in rows] == ["1", "8"]  # by throughput
    row = rows[1]
    assert row["Inferences/Second"] == "4000"
    # avg 2000 - send 10 - recv 15 - queue 300 - compute 950 = 725: the network and the server's I/O.
    assert row["Network+Server Send/Recv"] == "725"
    assert (row["Client Send"], row["Client Recv"], row["request/response"], row["response wait"]) == (
        "10", "15", "25", "1975",
    )  # fmt: skip
