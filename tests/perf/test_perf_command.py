"""`naiad perf` run as a user runs it, against a real `naiad serve`: the steps it prints, the
CSV perf_analyzer's readers take, each way of sending (HTTP binary and JSON, gRPC, system
shared memory, batches, request rates, sequences, data files), and one-line errors."""

from __future__ import annotations

import csv
import json

import pytest
from perf_servers import PERF_ANALYZER_CSV_HEADER, QUICK, naiad_perf, table_rows

SUMMARY_COLUMNS = [
    "Concurrency",
    "Infer/s",
    "p50 us",
    "p90 us",
    "p95 us",
    "p99 us",
    "Avg us",
    "Queue us",
    "Compute in us",
    "Compute infer us",
    "Compute out us",
    "Overhead us",
    "Client CPU",
    "Errors",
]


def step_blocks(stdout: str) -> dict[str, dict[str, str]]:
    """Each step's `name: value` lines, by the step's first line."""
    blocks: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in stdout.splitlines():
        if line.startswith(("Request concurrency:", "Request rate:")):
            current = blocks[line] = {}
        elif line.startswith("    ") and ": " in line:
            key, value = line.strip().split(": ", 1)
            current[key] = value
    return blocks


def test_each_step_prints_client_server_and_cpu_figures_then_one_table(server):
    result = naiad_perf("-m", "add_sub", "-u", server.http_url, "--concurrency-range", "1:3:2", *QUICK)
    assert result.returncode == 0, result.stderr
    # No terminal: no progress bar, nothing on stderr.
    assert result.stderr == ""
    assert result.stdout.startswith(f"*** naiad perf: model add_sub at {server.http_url} over http ***\n")
    blocks = step_blocks(result.stdout)
    assert list(blocks) == ["Request concurrency: 1", "Request concurrency: 3"]
    for block in blocks.values():
        requests = int(block["Request count"])
        assert requests > 20
        assert block["Errors"] == "0"
        assert block["Client CPU"].endswith("% of one core")
        # The server counted the same requests (give or take those at the windows' edges).
        assert abs(int(block["Successful request count"]) - requests) <= max(10, requests // 10)
        assert block["Avg request latency"].endswith("usec)")
        assert "queue " in block["Avg request latency"] and "compute infer " in block["Avg request latency"]
    rows = table_rows(result.stdout)
    assert list(rows[0]) == SUMMARY_COLUMNS
    assert [row["Concurrency"] for row in rows] == ["1", "3"]
    for row in rows:
        assert float(row["Infer/s"]) > 0
        assert int(row["p50 us"]) <= int(row["p90 us"]) <= int(row["p95 us"]) <= int(row["p99 us"])
        assert row["Errors"] == "0"


def test_the_csv_has_perf_analyzers_header_and_reads_as_its_readers_read_it(server, tmp_path):
    report = tmp_path / "report.csv"
    result = naiad_perf("-m", "add_sub", "-u", server.http_url, "--concurrency-range", "1:2", "-f", str(report), *QUICK)
    assert result.returncode == 0, result.stderr
    text = report.read_text()
    assert text.splitlines()[0] == PERF_ANALYZER_CSV_HEADER
    # Model Analyzer and genai-perf read the file with csv.DictReader on that header.
    with report.open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert sorted(row["Concurrency"] for row in rows) == ["1", "2"]
    # Sorted by throughput, as perf_analyzer writes them.
    assert [float(r["Inferences/Second"]) for r in rows] == sorted(float(r["Inferences/Second"]) for r in rows)
    for row in rows:
        assert float(row["Inferences/Second"]) > 0
        latencies = [int(row[f"p{p} latency"]) for p in (50, 90, 95, 99)]
        assert latencies == sorted(latencies) and latencies[0] > 0
        assert int(row["request/response"]) == int(row["Client Send"]) + int(row["Client Recv"])
        assert int(row["response wait"]) == int(row["Avg latency"]) - int(row["request/response"])


def test_request_rates_and_a_percentile_change_the_first_and_latency_columns(server, tmp_path):
    report = tmp_path / "rates.csv"
    result = naiad_perf(
        "-m", "add_sub", "-u", server.http_url, "--request-rate-range", "50:100:50", "--percentile", "95",
        "-f", str(report), *QUICK,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert [row["Request rate"] for row in rows] == ["50", "100"]
    # A fixed schedule: the throughput is the rate asked for.
    for row, rate in zip(rows, (50, 100)):
        assert rate * 0.8 <= float(row["Infer/s"]) <= rate * 1.2
    header = report.read_text().splitlines()[0].split(",")
    assert header[0] == "Request Rate"
    # As perf_analyzer: no average column when stabilising on a percentile.
    assert "Avg latency" not in header and "p95 latency" in header


@pytest.mark.parametrize(
    "flags",
    [
        ("-i", "grpc"),
        ("--input-tensor-format", "json", "--output-tensor-format", "json"),
        ("--shared-memory", "system"),
        ("-i", "grpc", "--shared-memory", "system"),
        ("-b", "4", "--input-data", "zero"),
    ],
    ids=["grpc", "http-json", "http-shm", "grpc-shm", "batch-4"],
)
def test_every_way_of_sending_is_answered_without_errors(server, flags):
    url = server.grpc_url if "grpc" in flags else server.http_url
    result = naiad_perf("-m", "add_sub", "-u", url, *flags, *QUICK)
    assert result.returncode == 0, result.stderr
    (row,) = table_rows(result.stdout)
    assert list(row) == SUMMARY_COLUMNS  # the same columns whatever the protocol
    assert row["Errors"] == "0"
    (block,) = step_blocks(result.stdout).values()
    requests = int(block["Request count"])
    assert requests > 20
    batch = 4 if "-b" in flags else 1
    # Throughput counts inferences: requests times the batch size.
    assert float(row["Infer/s"]) == pytest.approx(float(block["Throughput"].split()[0]), rel=0.01)
    assert abs(int(block["Successful request count"]) - requests) <= max(10, requests // 10)
    if batch > 1:
        assert int(block["Successful request count"]) > 0


def test_a_data_file_is_sent_as_written(server, logs, tmp_path):
    data = tmp_path / "data.json"
    data.write_text(
        json.dumps(
            {
                "data": [
                    {"INPUT0": [1, 2, 3], "INPUT1": ["first"]},
                    {"INPUT0": {"content": [[4, 5, 6]], "shape": [3]}, "INPUT1": {"content": ["second"], "shape": [1]}},
                ]
            }
        )
    )
    result = naiad_perf("-m", "logged", "-u", server.http_url, "--input-data", str(data), *QUICK)
    assert result.returncode == 0, result.stderr
    executions = [json.loads(line)["inputs"] for line in (logs / "logged.jsonl").read_text().splitlines()]
    assert len(executions) > 20
    sent = {(tuple(e["INPUT0"]), e["INPUT1"][0]) for e in executions}
    assert sent == {((1, 2, 3), "first"), ((4, 5, 6), "second")}


def test_a_sequence_model_gets_sequences_of_the_given_length(server, logs):
    result = naiad_perf("-m", "sequence", "-u", server.http_url, "--sequence-length", "3", *QUICK)
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout)[0]["Errors"] == "0"
    executions = [json.loads(line)["inputs"] for line in (logs / "sequence.jsonl").read_text().splitlines()]
    controls = [(e["START"][0], e["END"][0], e["CORRID"][0]) for e in executions]
    # The first request tried alone (a sequence of one), then sequences of three, ids in turn.
    assert controls[0] == (1, 1, 1)
    assert controls[1:10] == [
        (1, 0, 2), (0, 0, 2), (0, 1, 2), (1, 0, 3), (0, 0, 3), (0, 1, 3), (1, 0, 4), (0, 0, 4), (0, 1, 4),
    ]  # fmt: skip


def test_a_variable_dimension_takes_its_size_from_shape(server):
    result = naiad_perf("-m", "variable", "-u", server.http_url, "--shape", "INPUT0:5", *QUICK)
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout)[0]["Errors"] == "0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("-m", "no_such_model"),
            "error: model 'no_such_model' is not available at {http}: ",
        ),
        (
            ("-m", "add_sub", "--shape", "INPUT0:3"),
            "error: --shape INPUT0:3 does not fit model 'add_sub': input 'INPUT0' has shape [4] "
            "(without the batch dimension)\n",
        ),
        (
            ("-m", "add_sub", "--shape", "INPUT9:4"),
            "error: --shape INPUT9: model 'add_sub' has no input 'INPUT9' (its inputs: INPUT0, INPUT1)\n",
        ),
        (
            ("-m", "add_sub", "--shape", "INPUT0"),
            "error: --shape 'INPUT0': expected NAME:DIMS, e.g. INPUT0:1,16\n",
        ),
        (
            ("-m", "variable"),
            "error: input 'INPUT0' of model 'variable' has a variable dimension ([-1]): give its shape with "
            "--shape INPUT0:DIMS\n",
        ),
        (
            ("-m", "add_sub", "-b", "9"),
            "error: -b 9: more than model 'add_sub''s max_batch_size 8\n",
        ),
        (
            ("-m", "failing"),
            "error: model 'failing' refused the request: HTTP 500: ",
        ),
        (
            ("-m", "add_sub", "--concurrency-range", "4:2"),
            "error: --concurrency-range 4:2: END is less than START\n",
        ),
    ],
    ids=["unknown-model", "wrong-shape", "unknown-input", "shape-syntax", "unset-dim", "batch", "refused", "range"],
)
def test_bad_input_is_one_line_and_exit_status_1(server, args, message):
    result = naiad_perf(*args, "-u", server.http_url, *QUICK)
    assert result.returncode == 1
    assert result.stdout.count("\n") <= 1  # at most the banner: no table, no traceback
    assert result.stderr.startswith(message.format(http=server.http_url))
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "error: --input-data {path}: not valid JSON: "),
        ('{"rows": []}', 'error: --input-data {path}: expected an object with a "data" list, as perf_analyzer reads\n'),
        ('{"data": [{"INPUT0": [1, 2, 3]}]}', "error: --input-data {path}: step 0 has no data for input 'INPUT1'\n"),
        (
            '{"data": [{"INPUT0": [1, 2], "INPUT1": ["x"]}]}',
            'error: --input-data {path}: step 0: 2 values do not fill shape [3] (give the shape with "shape" or --shape)\n',
        ),
    ],
    ids=["syntax", "no-data", "missing-input", "short"],
)
def test_a_bad_data_file_is_one_line_and_exit_status_1(server, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = naiad_perf("-m", "logged", "-u", server.http_url, "--input-data", str(path), *QUICK)
    assert result.returncode == 1
    assert result.stderr.startswith(message.format(path=path))
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_unreachable_server_is_one_line_and_exit_status_1(protocol):
    from naiad.testing import free_port

    port = free_port()
    result = naiad_perf("-m", "add_sub", "-i", protocol, "-u", f"127.0.0.1:{port}", *QUICK)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach the server at 127.0.0.1:{port}")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_help_lists_every_flag_with_its_help():
    result = naiad_perf("--help")
    assert result.returncode == 0
    for flag in (
        "-m", "-u", "-i", "-x", "-b", "--concurrency-range", "--request-rate-range", "--shape", "--input-data",
        "--input-tensor-format", "--output-tensor-format", "--shared-memory", "--sequence-length",
        "--measurement-interval", "-p", "-s", "--stability-percentage", "--max-trials", "-r", "--percentile", "-f",
        "--latency-report-file",
    ):  # fmt: skip
        assert f" {flag} " in result.stdout or f" {flag}," in result.stdout or f"[{flag} " in result.stdout, flag
    text = " ".join(result.stdout.split())
    # perf_analyzer's defaults.
    assert "the length of each measurement window, in ms (default 5000)" in text
    assert "in throughput and in latency (default 10)" in text
    assert "before giving up on stability (default 10)" in text
