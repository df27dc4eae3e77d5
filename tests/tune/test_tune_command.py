"""`naiad tune` through its real command line: against the `naiad serve` it starts itself on a
repository and against a server already running, with short measurement windows and small
spaces so each run stays bounded."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from tune_models import write_cnn, write_doubler

from naiad.cli.main import build_parser
from naiad.config import parse_config_text
from naiad.testing import ServerProcess

# Short windows: these tests check what tune does, not how fast the model is.
FAST = ("--measurement-interval", "150", "--max-trials", "3", "--stability-percentage", "50")
# Windows long enough for the figures of a loaded two-CPU machine to mean something.
STEADIER = ("--measurement-interval", "200", "--max-trials", "4", "--stability-percentage", "20")


def naiad_tune(*args: str | Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "naiad.cli", "tune", *(str(a) for a in args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def command_lines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, NotADirectoryError):
            continue
    return lines


def tune_json(output: Path) -> dict:
    return json.loads((output / "tune.json").read_text())


@pytest.fixture(scope="module")
def doubler_repo(tmp_path_factory) -> Path:
    return write_doubler(tmp_path_factory.mktemp("doubler"))


def test_a_candidate_that_fails_to_load_is_recorded_with_the_servers_message(doubler_repo, tmp_path):
    before = (doubler_repo / "doubler" / "config.pbtxt").read_bytes()
    out = tmp_path / "out"
    result = naiad_tune(
        "doubler",
        "--model-repository",
        doubler_repo,
        "--search",
        "brute",
        "--instances",
        "1",
        "--max-batch-sizes",
        "4,16",
        "--queue-delays-us",
        "0",
        "--max-concurrency",
        "2",
        "-o",
        out,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    record = tune_json(out)
    outcomes = {tuple(sorted(c["candidate"].items())): c for c in record["candidates"]}
    refused = outcomes[(("instances", 1), ("max_batch_size", 16), ("max_queue_delay_us", 0))]
    assert refused["loaded"] is False
    assert "this model takes batches of at most 8, not 16" in refused["message"]
    served = outcomes[(("instances", 1), ("max_batch_size", 4), ("max_queue_delay_us", 0))]
    assert served["loaded"] is True and [s["concurrency"] for s in served["steps"]][:1] == [1]
    assert served["memory_mb"] > 10  # the PSS of the server tune started: a real figure
    assert record["best"]["throughput"]["candidate"] == {"instances": 1, "max_batch_size": 4, "max_queue_delay_us": 0}
    assert "doubler: brute search, 2 candidates (1 failed to load, 0 from the checkpoint)" in result.stdout
    # Without a terminal, the progress is one line per candidate on stderr, with the time left.
    assert "[1/~2] instances=1,max_batch_size=4,max_queue_delay_us=0: " in result.stderr
    assert "[2/~2] instances=1,max_batch_size=16,max_queue_delay_us=0: failed to load; about 0s left" in result.stderr
    # The user's file is untouched; the best configuration is a file of its own that parses.
    assert (doubler_repo / "doubler" / "config.pbtxt").read_bytes() == before
    written = parse_config_text((out / "throughput" / "config.pbtxt").read_text(), "doubler")
    assert (written.max_batch_size, written.instance_group[0].count) == (4, 1)
    assert "this model takes batches of at most 8, not 16" in (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 3  # steps with the front, the search's path, memory
    # One self-contained page: nothing to fetch, nothing to run.
    assert not [tag for tag in ("<script", "<link", " src=", "<img") if tag in page]
    assert "this model takes batches of at most 8, not 16" in page


@pytest.fixture(scope="module")
def running_doubler(doubler_repo):
    with ServerProcess(doubler_repo, "--model-control-mode", "explicit") as server:
        yield server


def test_a_running_server_is_tuned_and_left_without_the_candidate(running_doubler, tmp_path):
    out = tmp_path / "out"
    result = naiad_tune(
        "doubler",
        "-u",
        running_doubler.http_url,
        "--instances",
        "1,2",
        "--max-batch-sizes",
        "8",
        "--queue-delays-us",
        "0",
        "--max-concurrency",
        "2",
        "--latency-budget-ms",
        "500",
        "--min-throughput",
        "1000000",
        "-o",
        out,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    record = tune_json(out)
    assert [c["candidate"]["instances"] for c in record["candidates"]] == [1, 2]
    # No step reached the floor: no answer for the latency objective, and no file for it.
    assert record["best"]["latency"] is None and record["best"]["throughput"] is not None
    assert "| latency    | -            | -      | -           | -" in result.stdout
    assert not (out / "latency").exists() and (out / "throughput" / "config.pbtxt").exists()
    assert all(c["memory_mb"] is None for c in record["candidates"])  # no --server-pid: n/a
    assert "| n/a |" in (out / "report.md").read_text()
    # The model is unloaded at the end, not left serving a candidate's configuration.
    client = httpclient.InferenceServerClient(running_doubler.http_url)
    assert client.is_model_ready("doubler") is False


def test_a_model_the_server_had_loaded_is_left_with_the_configuration_it_had(doubler_repo, tmp_path):
    with ServerProcess(doubler_repo, "--model-control-mode", "explicit", "--load-model", "doubler") as server:
        result = naiad_tune(
            "doubler",
            "-u",
            server.http_url,
            "--instances",
            "2",
            "--max-batch-sizes",
            "4",
            "--queue-delays-us",
            "300",
            "--max-concurrency",
            "1",
            "-o",
            tmp_path / "out",
            *FAST,
        )
        assert result.returncode == 0, result.stderr
        assert tune_json(tmp_path / "out")["candidates"][0]["loaded"] is True
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_model_ready("doubler") is True
        config = client.get_model_config("doubler")
        # config.pbtxt's own values, not the candidate's (2 instances, batches of 4, 300 us).
        assert config["max_batch_size"] == 8
        assert [group["count"] for group in config["instance_group"]] == [1]
        assert config["dynamic_batching"].get("max_queue_delay_microseconds", 0) == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--instances", "1,x"), "--instances: '1,x' is not a comma-separated list of whole numbers"),
        (("--latency-budget-ms", "0"), "latency_budget_ms must be more than 0, got 0"),
        (("--max-concurrency", "0"), "--max-concurrency must be at least 1, got 0"),
        (("--shape", "INPUT0"), "--shape 'INPUT0': expected NAME:DIMS"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(flags, message, tmp_path):
    result = naiad_tune("doubler", "-u", "127.0.0.1:1", "-o", tmp_path, *flags, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


def test_errors_of_the_server_or_the_space_are_one_line_and_status_1(running_doubler, tmp_path):
    unknown = naiad_tune("no_such_model", "-u", running_doubler.http_url, "-o", tmp_path, timeout=60)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: ") and "no_such_model" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    workers = naiad_tune("doubler", "-u", running_doubler.http_url, "--workers", "1,2", "-o", tmp_path, timeout=60)
    assert workers.returncode == 1
    assert workers.stderr == (
        "error: workers: tune can only change the workers of a server it starts itself (give a model repository)\n"
    )
    unreachable = naiad_tune("doubler", "-u", "127.0.0.1:1", "-o", tmp_path, timeout=60)
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith("error: cannot reach the server at http://127.0.0.1:1")


def test_a_checkpoint_of_another_model_is_refused(running_doubler, tmp_path):
    checkpoint = tmp_path / "other.jsonl"
    checkpoint.write_text('{"format": "naiad-tune-checkpoint/1", "model": "cnn"}\n')
    result = naiad_tune(
        "doubler", "-u", running_doubler.http_url, "--checkpoint", checkpoint, "-o", tmp_path / "out", timeout=60
    )
    assert result.returncode == 1
    assert f"{checkpoint} holds the search of model 'cnn', not 'doubler'" in result.stderr


def test_help_describes_every_flag():
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "tune", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    flags = [
        "--model-repository",
        "--server-pid",
        "--serve-flags",
        "--url",
        "--timeout",
        "--search",
        "--instances",
        "--max-batch-sizes",
        "--preferred-batch-sizes",
        "--queue-delays-us",
        "--intra-op-threads",
        "--inter-op-threads",
        "--workers",
        "--latency-budget-ms",
        "--min-throughput",
        "--max-memory-mb",
        "--max-concurrency",
        "--measurement-interval",
        "--stability-percentage",
        "--max-trials",
        "--shape",
        "--output-dir",
        "--checkpoint",
    ]
    parser = build_parser()
    tune = next(action.choices["tune"] for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    described = {s: a.help for a in tune._actions for s in a.option_strings}
    assert sorted(set(described) - {"-h", "--help", "-u", "-s", "-o"}) == sorted(flags)
    assert all(described[flag] for flag in flags)
    for flag in flags:
        assert flag in result.stdout


SPACE_FLAGS = {
    "instances": "--instances",
    "max_batch_size": "--max-batch-sizes",
    "max_queue_delay_us": "--queue-delays-us",
    "intra_op_threads": "--intra-op-threads",
}


@pytest.mark.slow
def test_quick_finds_near_the_sweeps_best_in_a_fraction_of_its_time(tmp_path):
    """The issue's measure on a small space of the CNN. brute measures every point and keeps a
    checkpoint; quick then walks the same measurements from that checkpoint, so its time is
    what its points cost the sweep (one set of figures: a shared two-CPU machine cannot give
    two separate runs the same conditions). Where quick's pick is under 0.95 of the sweep's
    best on those figures, the two winners are measured again, alternately, twice each: the
    sweep's best of 48 single measurements errs high (its luckiest window), so the verdict is
    then taken on figures measured side by side."""
    repo = write_cnn(tmp_path / "models")
    checkpoint = tmp_path / "search.jsonl"
    # Steps of 1 and 2 connections in 150 ms windows: 48 points in about 50 seconds, still the
    # suite's longest test (with three instances as well, 72 points took 80-110 s).
    steady = ("--measurement-interval", "150", "--max-trials", "4", "--stability-percentage", "20")
    limits = ("--max-concurrency", "2", "--latency-budget-ms", "50", *steady)
    space = {"instances": "1,2", "max_batch_size": "1,4,16,64", "max_queue_delay_us": "0,200,1000"}
    space["intra_op_threads"] = "1,2"

    def tune(out: str, values: dict[str, str], *flags: str | Path) -> dict:
        chosen = [item for name, value in values.items() for item in (SPACE_FLAGS[name], value)]
        result = naiad_tune("cnn", "--model-repository", repo, *chosen, *limits, *flags, "-o", tmp_path / out)
        assert result.returncode == 0, result.stderr
        return tune_json(tmp_path / out)

    swept = tune("brute", space, "--search", "brute", "--checkpoint", checkpoint)
    found = tune("quick", space, "--checkpoint", checkpoint)
    assert len(swept["candidates"]) == 48
    assert found["resumed"] == len(found["candidates"])  # nothing measured twice
    # Quick's path follows the figures it reads, so on a noisy machine it may walk a few more
    # points (21 of 72 in one CI run of the larger space: 0.29 of the sweep's time; replays of
    # recorded sweeps 0.12-0.22; 9 of these 48 in a replay, 0.19). A test that must not fail
    # on noise asserts the ceiling a search gone wrong breaks (one that walks most of the
    # space is near 1.0) and prints the share; the 0.25 of the goal is measured by
    # bench/tune_vs_sweep.py (docs/tune.md).
    share = found["measured_seconds"] / swept["measured_seconds"]
    print(f"quick measured {len(found['candidates'])} of 48 points: {share:.2f} of the sweep's time")
    assert share <= 0.40, (len(found["candidates"]), found["measured_seconds"], swept["measured_seconds"])
    # On the sweep's own figures (quick walked the same measurements) first; where quick's
    # pick falls short of the sweep's luckiest window, the two winners side by side.
    figures = {
        name: record["best"]["throughput"]["step"]["throughput"]
        for name, record in (("quick", found), ("brute", swept))
    }
    if figures["quick"] >= 0.95 * figures["brute"]:
        return
    winners = {name: record["best"]["throughput"]["candidate"] for name, record in (("quick", found), ("brute", swept))}
    again: dict[str, list[float]] = {"quick": [], "brute": []}
    for round_ in range(2):
        for name, winner in winners.items():
            point = {dimension: str(value) for dimension, value in winner.items()}
            record = tune(f"again-{name}-{round_}", point, "--search", "brute")
            again[name].append(record["best"]["throughput"]["step"]["throughput"])
    # Side by side, the same configuration's 200 ms windows differ by up to 20% on two shared
    # CPUs (2,952 and 3,690/s in one CI run; 0.88 and 0.94 side by side in two runs), so this
    # test, which must not fail on noise, asserts only a floor that a search gone wrong falls
    # under (the first rules' miss: 0.61 and 0.77). The 0.95 of the goal is measured with
    # 500 ms windows by bench/tune_vs_sweep.py (docs/tune.md); the ratio is printed here.
    ratio = sum(again["quick"]) / sum(again["brute"])
    print(f"quick's winner side by side: {ratio:.2f} of the sweep's", winners, again)
    assert ratio >= 0.80, (winners, again)


@pytest.mark.slow
def test_workers_are_searched_by_restarting_the_server_tune_started(doubler_repo, tmp_path):
    out = tmp_path / "out"
    result = naiad_tune(
        "doubler",
        "--model-repository",
        doubler_repo,
        "--search",
        "brute",
        "--workers",
        "1,2",
        "--instances",
        "1",
        "--max-batch-sizes",
        "8",
        "--queue-delays-us",
        "0",
        "--max-concurrency",
        "2",
        "-o",
        out,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    record = tune_json(out)
    memory = {c["candidate"]["workers"]: c["memory_mb"] for c in record["candidates"] if c["loaded"]}
    assert sorted(memory) == [1, 2], [c["message"] for c in record["candidates"]]
    # The second candidate ran on a server with one more process: a front door of its own.
    assert memory[2] > memory[1] + 10, memory
    best = record["best"]["throughput"]["candidate"]["workers"]
    assert f"# serve it with: naiad serve --workers {best}" in (out / "throughput" / "config.pbtxt").read_text()


def test_a_memory_ceiling_no_candidate_meets_leaves_no_answer(doubler_repo, tmp_path):
    out = tmp_path / "out"
    result = naiad_tune(
        "doubler",
        "--model-repository",
        doubler_repo,
        "--instances",
        "1",
        "--max-batch-sizes",
        "4",
        "--queue-delays-us",
        "0",
        "--max-concurrency",
        "1",
        "--max-memory-mb",
        "1",
        "-o",
        out,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    record = tune_json(out)
    assert record["best"] == {"throughput": None, "latency": None}
    assert "no candidate met the constraints" in result.stdout
    memory = record["candidates"][0]["memory_mb"]
    assert f"memory {memory:.0f} MiB > 1 MiB" in (out / "report.md").read_text()


def _sigint_by_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_an_interrupted_search_resumes_from_its_checkpoint(tmp_path):
    # A repository of its own: the module's running server serves the shared one.
    doubler_repo = write_doubler(tmp_path / "models")
    checkpoint, out = tmp_path / "search.jsonl", tmp_path / "out"
    flags = [
        "doubler",
        "--model-repository",
        str(doubler_repo),
        "--search",
        "brute",
        "--instances",
        "1",
        "--max-batch-sizes",
        "2,4,8",
        "--queue-delays-us",
        "0",
        "--max-concurrency",
        "2",
        "--checkpoint",
        str(checkpoint),
        "-o",
        str(out),
        *FAST,
    ]
    command = [sys.executable, "-m", "naiad.cli", "tune", *flags]
    # Ctrl-C as a terminal delivers it, whatever this process inherited: a job a
    # non-interactive shell starts in the background ignores SIGINT (POSIX), its children too,
    # and Python then leaves it ignored.
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=_sigint_by_default
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # one candidate measured and in the file
    assert first.startswith("[1/~3] instances=1,max_batch_size=2,max_queue_delay_us=0: "), first
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[1]
    assert process.returncode == 130
    assert f"interrupted; run again with --checkpoint {checkpoint} to resume" in rest
    assert not out.exists()  # no answer from half a search
    # The server tune started went with it.
    assert [cmd for cmd in command_lines() if str(doubler_repo) in cmd and "serve" in cmd] == []
    resumed = naiad_tune(*flags)
    assert resumed.returncode == 0, resumed.stderr
    record = tune_json(out)
    assert len(record["candidates"]) == 3 and record["resumed"] >= 1
    # The first candidate came back from the file, not measured again.
    first_again = resumed.stderr.splitlines()[0]
    assert first_again.startswith("[1/~3] instances=1,max_batch_size=2,max_queue_delay_us=0: ")
    assert first_again.endswith(" inf/s within the constraints (from the checkpoint)")
