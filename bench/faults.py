#!/usr/bin/env python3
"""What happens to clients' requests when a server starts, loses a process, stops, reloads
models, or meets clients that are slow, stalled or idle: naiad beside the real Triton 2.51.

    .venv/bin/python bench/faults.py [--cases start-burst worker-kill ...] [--no-triton]
        [--json faults.json]

Each case starts a fresh server on loopback with a model repository this script writes (Python
models: add_sub as ../shared/bench has it, `slow` with four instances that take 0.5 s a request,
`big` that answers N float32 values, `reload_me`), loads it with its own asyncio HTTP/1.1
client (bench/loadkit.py) and prints, per case and server:

- sent: requests written to a connection;
- answered: 2xx answers;
- failed: answers with another status (the server said no: 503 while draining, 500 ...);
- lost: no answer (the connection was closed or reset under the request, or 10 s passed);
- refused: connections that could not be opened (no request was sent on them).

Cases (--cases picks; all by default, about 9 minutes with Triton):

- start-burst: from the instant /v2/health/ready first answers 200 (polled every 5 ms), 20 bursts
  of 64 new connections, each sending one add_sub request. naiad with its defaults, naiad
  --workers 3, Triton.
- worker-kill: naiad --workers 2 and --workers 3 under 64 keep-alive connections of add_sub;
  after 4 s, SIGKILL to one process found by its name (/proc/PID/comm): naiad-home and
  naiad-worker-0 (the supervisor) with two workers, naiad-worker-2 (a front door) and naiad-home
  with three. The row counts the requests that ended after the kill (those in flight at it
  included). Prints when a process of the same name appeared again and when the request rate
  (100 ms bins, a 300 ms window) was back to 80% of the 3 s before the kill (the goal: within
  1 s; watched for up to 15 s). naiad only.
- stub-kill: the same with SIGKILL to add_sub's Python model process (naiad: a descendant running
  naiad_backend_python.model_side, not the stub template; Triton: its triton_python_backend_stub).
- sigterm: SIGTERM to the server's main process under 64 connections of add_sub, 4 of `slow`
  (0.5 s requests, so some are always in flight) and 8 gRPC add_sub calls on one channel; the
  clients go on sending (reconnecting when told by Connection: close, or closed) until the
  process exits or for 2 s (--term-load), then finish their request in flight and stop. Prints
  the answers after the signal and those carrying Connection: close, the statuses, the time to
  exit and any process left behind 5 s after it. naiad with its defaults, naiad --workers 3,
  Triton.
- reload: explicit model control (naiad --model-control-mode explicit --load-model add_sub;
  Triton the same flags), 32 connections of add_sub while another client runs 50 cycles of
  load reload_me, one inference on it, unload reload_me. Prints the cycles' own failures, the
  time per cycle and the model processes and RSS before and after.
- slow-uploads: beside 8 connections of add_sub, 32 clients that send half a request head and
  stop, 32 that send a head (Content-Length 1 MiB) and then one body byte a second, 8 that send
  40 MiB of a 48 MiB body and stop. Prints, per kind, how many the server closed and after how
  long, its answers, and the RSS of all the server's processes before, at the peak, at the end
  of the window (35 s: naiad's header timeout is 30 s) and 3 s after the clients left.
- slow-readers: beside 8 connections of add_sub, 16 clients (4 KiB receive buffer) that send
  4 pipelined requests for 16 MiB answers each and never read. Same figures (20 s window).
- idle: beside 16 connections of add_sub, 5,000 more connections held open: half never send a
  byte, half send one GET /v2/health/live and then stay idle on keep-alive. Prints the add_sub
  rate before and with them, RSS, and when the server closed idle ones (35 s window).

RSS is summed over the server's processes (shared pages counted in each: an upper bound).
naiad runs with its defaults unless a case says otherwise (`--naiad-flags` adds flags to every
naiad start). The client is one Python process on uvloop, one request in flight per connection;
it needs about 25-40 us of CPU per request, so on a 2-CPU machine it takes a CPU of its own and
the rates are the client's and server's together (compare naiad with Triton in one run, not with
bench/load.sh's wrk figures). Ports: Triton 18300-18302, naiad 19300-19302, on 127.0.0.1; every
server started is stopped at the end, on failure too (its process group, and every process of
it this script saw, orphans included).

BENCH_DIR overrides where shared/bench is (default ../shared/bench beside the checkout); ANCHORS
where its environments are (default /tmp/anchors, as triton.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import loadkit as lk

CASES = ("start-burst", "worker-kill", "stub-kill", "sigterm", "reload", "slow-uploads", "slow-readers", "idle")
LOAD_CONNECTIONS = 64
BIN_S = 0.1  # the request rate's bins
RECOVERY_WINDOW_S = 0.3  # a rate is back once a window this long reaches the share below
RECOVERY_SHARE = 0.8
BEFORE_S = 3.0  # load before a fault, the rate it is held against
WARM_S = 1.0
AFTER_MAX_S = 15.0  # the longest a case watches for recovery


@dataclass
class Row:
    case: str
    server: str
    tally: lk.Tally
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    args: argparse.Namespace
    work: Path
    rows: list[Row] = field(default_factory=list)

    def repo(self, name: str, models: list[str]) -> Path:
        path = self.work / name
        if not path.exists():
            lk.write_repository(path, models)
        return path

    def ports(self, kind: str) -> lk.Ports:
        return lk.Ports(*(self.args.triton_ports if kind == "triton" else self.args.naiad_ports))

    def start(self, kind: str, repo: Path, flags: Sequence[str] = (), triton_args: str = "") -> lk.Server:
        log = self.work / f"{kind}-{len(self.rows)}-{time.monotonic_ns()}.log"
        return lk.start(kind, self.args.naiad, repo, self.ports(kind), [*flags, *self.naiad_flags()], log, triton_args)

    def naiad_flags(self) -> list[str]:
        return shlex.split(self.args.naiad_flags)

    def kinds(self, naiad_variants: list[list[str]], triton: bool = True) -> list[tuple[str, list[str]]]:
        found = [("naiad", flags) for flags in naiad_variants]
        return found + ([("triton", [])] if triton and not self.args.no_triton else [])

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print_row(row)


# -- output ---------------------------------------------------------------------------------

HEADER = f"{'case':<32} {'server':<34} {'sent':>7} {'answered':>8} {'failed':>6} {'lost':>5} {'refused':>7}"


def print_row(row: Row, notes: bool = True) -> None:
    t = row.tally
    print(
        f"{row.case:<32} {row.server:<34} {t.sent:>7} {t.answered:>8} {t.failed:>6} {t.lost:>5} {t.refused:>7}",
        flush=True,
    )
    if notes:
        for note in row.notes:
            print(f"    {note}", flush=True)


def describe(t: lk.Tally) -> str:
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(t.statuses.items()) if not k.startswith("2") and k != "OK")
    parts = [f"non-2xx {{{statuses}}}" if statuses else "", f"lost {dict(t.lost_why)}" if t.lost else ""]
    if t.told_to_close:
        parts.append(f"{t.told_to_close} answers said Connection: close")
    if t.closed_idle:
        parts.append(f"{t.closed_idle} connections closed between requests")
    return "; ".join(p for p in parts if p)


def add_note(notes: list[str], text: str) -> None:
    if text:
        notes.append(text)


def mib(value: float) -> str:
    return f"{value:,.0f} MiB"


# -- rate and recovery ----------------------------------------------------------------------


def recovery_s(tally: lk.Tally, fault_at: float, baseline: float, until: float) -> float | None:
    """Seconds from the fault to the start of the first window of RECOVERY_WINDOW_S whose rate
    is at least RECOVERY_SHARE of the baseline; None when none was by `until`."""
    t = fault_at
    while t + RECOVERY_WINDOW_S <= until:
        if tally.rate(t, t + RECOVERY_WINDOW_S) >= RECOVERY_SHARE * baseline:
            return t - fault_at
        t += BIN_S
    return None


def lowest_bin(tally: lk.Tally, start: float, end: float) -> float:
    rates = []
    t = start
    while t + BIN_S <= end:
        rates.append(tally.rate(t, t + BIN_S))
        t += BIN_S
    return min(rates) if rates else 0.0


async def watch_recovery(tally: lk.Tally, fault_at: float, baseline: float, cap_s: float) -> None:
    """Returns 1 s after the rate is back, or after `cap_s`."""
    while time.monotonic() < fault_at + cap_s:
        await asyncio.sleep(0.2)
        now = time.monotonic()
        back = recovery_s(tally, fault_at, baseline, now)
        if back is not None and now >= fault_at + back + RECOVERY_WINDOW_S + 1.0:
            return


async def wait_for(check: Callable[[], bool], timeout: float, every: float = 0.01) -> float | None:
    """Seconds until `check()` held, or None after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        await asyncio.sleep(every)
    return None


# -- start burst ----------------------------------------------------------------------------


async def bursts_after_ready(
    server: lk.Server, exited: Callable[[], bool], count: int, size: int
) -> tuple[lk.Tally, list[lk.Tally], float]:
    """Polls readiness every 5 ms from a new connection each time; from its first 200, `count`
    bursts of `size` new connections with one add_sub request each, one burst after another."""
    started = time.monotonic()
    probe = lk.get("/v2/health/ready")
    while True:
        if exited():
            raise RuntimeError(f"{server.label} exited before it was ready; its log: {server.log}")
        if time.monotonic() - started > lk.READY_TIMEOUT_S:
            raise RuntimeError(f"{server.label} was not ready; its log: {server.log}")
        tally = lk.Tally()
        await lk.one_request(server.http, probe, tally, timeout=2.0)
        if tally.statuses.get("200"):
            break
        await asyncio.sleep(0.005)
    ready_s = time.monotonic() - started
    payload = lk.infer("add_sub", lk.add_sub_json())
    total, bursts = lk.Tally(), []
    for _ in range(count):
        burst = lk.Tally()
        await asyncio.gather(*(lk.one_request(server.http, payload, burst) for _ in range(size)))
        bursts.append(burst)
        total.add(burst)
    return total, bursts, ready_s


def case_start_burst(ctx: Context) -> None:
    repo = ctx.repo("basic", ["add_sub"])
    for kind, flags in ctx.kinds([[], ["--workers", "3"]]):
        ports = ctx.ports(kind)
        script: subprocess.Popen[str] | None = None
        if kind == "naiad":
            log = ctx.work / f"naiad-burst-{len(ctx.rows)}.log"
            server = lk.start_naiad(ctx.args.naiad, repo, ports, [*flags, *ctx.naiad_flags()], log)
        else:
            server, script = lk.start_triton(repo, ports)
        with lk.running(server):

            def exited(server: lk.Server = server, script: subprocess.Popen[str] | None = script) -> bool:
                if script is not None:
                    return script.poll() not in (None, 0)
                return not server.alive()

            try:
                total, bursts, ready_s = asyncio.run(
                    bursts_after_ready(server, exited, ctx.args.bursts, ctx.args.burst_size)
                )
            finally:
                if script is not None:
                    lk.adopt_triton(server, script)
            losses = [b.lost + b.failed for b in bursts]
            notes = [
                f"ready {ready_s:.2f} s after launch; {len(bursts)} bursts of {ctx.args.burst_size}",
                f"lost or failed per burst: {losses}",
            ]
            if describe(total):
                notes.append(describe(total))
            ctx.add(Row("start burst", server.label, total, notes, {"ready_s": ready_s, "per_burst": losses}))


# -- a process killed under load ------------------------------------------------------------


async def kill_under_load(
    server: lk.Server, find: Callable[[], list[int]], after_cap_s: float, expect_back: bool
) -> tuple[lk.Tally, dict[str, Any]]:
    """64 keep-alive connections of add_sub; after WARM_S + BEFORE_S, SIGKILL to the first
    process `find()` names; the load goes on until the rate is back (or `after_cap_s`)."""
    stop = False
    payload = lk.infer("add_sub", lk.add_sub_json())
    tally, tasks = lk.run_load(server.http, payload, LOAD_CONNECTIONS, lambda: stop)
    await asyncio.sleep(WARM_S + BEFORE_S)
    targets = find()
    if not targets:
        stop = True
        await asyncio.gather(*tasks)
        raise RuntimeError(f"{server.label}: no process to kill; its log: {server.log}")
    victim = targets[0]
    victim_name = lk.comm(victim)
    server.note_processes()
    fault_at = time.monotonic()
    baseline = tally.rate(fault_at - BEFORE_S, fault_at)
    before = tally.snapshot()
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        return any(pid != victim for pid in find())

    others = [pid for pid in server.seen | {server.pid} if pid != victim]

    def all_gone() -> bool:
        return not any(lk.alive(pid) for pid in others)

    replacement = asyncio.create_task(wait_for(replaced, after_cap_s))
    gone = asyncio.create_task(wait_for(all_gone, after_cap_s))
    if expect_back:
        await watch_recovery(tally, fault_at, baseline, after_cap_s)
    else:
        await asyncio.sleep(after_cap_s)
    stop = True
    await asyncio.gather(*tasks)
    end = time.monotonic()
    server.note_processes()
    figures = {
        "victim": victim_name,
        "rate_before": baseline,
        "replacement_s": await replacement,
        "all_others_gone_s": await gone,
        "recovery_s": recovery_s(tally, fault_at, baseline, end),
        "lowest_bin_rate": lowest_bin(tally, fault_at, min(end, fault_at + 2.0)),
        "rate_last_2s": tally.rate(end - 2.0, end),
        "before_kill": before.counts(),
        "watched_s": end - fault_at,
    }
    # The row counts what happened from the kill on; what came before is in the figures.
    return tally.since(before), figures


def before_note(figures: dict[str, Any]) -> str:
    b = figures["before_kill"]
    text = f"counts: requests that ended after the kill; in the {WARM_S + BEFORE_S:g} s before it: sent {b['sent']}, lost {b['lost']}"
    return text + f", failed {b['failed']}" + (" (start-up resets: see start burst)" if b["lost"] else "")


def recovery_notes(figures: dict[str, Any]) -> list[str]:
    replaced, back = figures["replacement_s"], figures["recovery_s"]
    return [
        f"killed {figures['victim']}; rate before {figures['rate_before']:,.0f}/s, lowest 100 ms after "
        f"{figures['lowest_bin_rate']:,.0f}/s",
        "replacement process "
        + (f"appeared after {replaced:.2f} s" if replaced is not None else f"none within {figures['watched_s']:.1f} s")
        + "; rate back to 80% "
        + (f"after {back:.2f} s" if back is not None else f"not within {figures['watched_s']:.1f} s")
        + " (goal: 1 s)"
        + (
            f"; the last 2 s of the watch: {figures['rate_last_2s']:,.0f}/s"
            if back is None and figures["watched_s"] >= 2.0
            else ""
        ),
        before_note(figures),
    ]


def case_worker_kill(ctx: Context) -> None:
    repo = ctx.repo("basic", ["add_sub"])
    plans = [(2, "naiad-home"), (2, "naiad-worker-0"), (3, "naiad-worker-2"), (3, "naiad-home")]
    for workers, name in plans:
        server = ctx.start("naiad", repo, ["--workers", str(workers)])
        with lk.running(server):
            root = server.pid
            names = ["naiad-worker-0", "naiad-home", *(f"naiad-worker-{i}" for i in range(2, workers))]
            wait_all = time.monotonic() + 30
            while not all(lk.pids_named(root, n) for n in names) and time.monotonic() < wait_all:
                time.sleep(0.1)
            supervisor = name == "naiad-worker-0"
            find = functools.partial(lk.pids_named, root, name)
            watch_s = 5.0 if supervisor else AFTER_MAX_S
            tally, figures = asyncio.run(kill_under_load(server, find, watch_s, expect_back=not supervisor))
            notes = (
                recovery_notes(figures) if not supervisor else [f"killed {name}, the supervisor", before_note(figures)]
            )
            if supervisor:
                notes += supervisor_aftermath(server, figures)
            add_note(notes, describe(tally))
            notes.append(f"after the load: an add_sub request answered {answer_status(server)}")
            ctx.add(Row(f"worker SIGKILL ({name})", server.label, tally, notes, figures))


def supervisor_aftermath(server: lk.Server, figures: dict[str, Any]) -> list[str]:
    """With worker 0 gone, the others should notice and stop (docs/performance.md: within a
    second): which are still there."""
    names = sorted(lk.comm(pid) for pid in server.seen if lk.alive(pid))
    figures["left_running"] = names
    if names:
        return [f"still running {figures['watched_s']:.1f} s after the kill: {', '.join(names)} (orphans)"]
    return [f"every other process of the server had exited {figures['all_others_gone_s']:.2f} s after the kill"]


def answer_status(server: lk.Server) -> str:
    status = lk.http_call(server.http, lk.infer("add_sub", lk.add_sub_json()), timeout=10)[0]
    return str(status) if status else "nothing (no server)"


def case_stub_kill(ctx: Context) -> None:
    repo = ctx.repo("basic", ["add_sub"])
    for kind, flags in ctx.kinds([[]]):
        server = ctx.start(kind, repo, flags)
        with lk.running(server):
            root = server.pid
            find = functools.partial(lk.model_processes, root, "add_sub")
            tally, figures = asyncio.run(kill_under_load(server, find, AFTER_MAX_S, expect_back=True))
            notes = recovery_notes(figures)
            add_note(notes, describe(tally))
            notes.append(f"after the load: an add_sub request answered {answer_status(server)}")
            ctx.add(Row("stub SIGKILL (add_sub)", server.label, tally, notes, figures))


# -- SIGTERM under load ---------------------------------------------------------------------


async def sigterm_under_load(
    server: lk.Server, more_load_s: float, exit_cap_s: float
) -> tuple[dict[str, lk.Tally], dict[str, Any]]:
    """SIGTERM to the main process under load; the clients go on sending for `more_load_s` (as
    clients do until a load balancer takes the server out), then each finishes its request in
    flight and stops; then the wait for the exit."""
    import grpc  # type: ignore[import-untyped]

    done = False
    fast, tasks = lk.run_load(server.http, lk.infer("add_sub", lk.add_sub_json()), LOAD_CONNECTIONS, lambda: done)
    slow, slow_tasks = lk.run_load(server.http, lk.infer("slow", lk.slow_json()), 4, lambda: done)
    # gRPC as its clients use it: one channel (one HTTP/2 connection), calls multiplexed on it.
    channel = grpc.aio.insecure_channel(f"{lk.HOST}:{server.ports.grpc}")
    rpc, body = lk.Tally(), lk.grpc_add_sub()
    tasks += slow_tasks + [
        asyncio.create_task(lk.grpc_unary_client(channel, lk.INFER_METHOD, body, rpc, lambda: done)) for _ in range(8)
    ]
    await asyncio.sleep(WARM_S + BEFORE_S)
    server.note_processes()
    signalled = time.monotonic()
    os.kill(server.pid, signal.SIGTERM)
    exited = asyncio.create_task(wait_for(lambda: not server.alive(), exit_cap_s, every=0.02))
    await asyncio.wait([exited], timeout=more_load_s)
    done = True
    await asyncio.gather(*tasks)
    await channel.close()
    exit_s = await exited
    # A process left behind may take a moment to notice its parent is gone: give it 5 s.
    others_gone = await wait_for(lambda: not any(lk.alive(pid) for pid in server.seen), 5.0, every=0.05)
    streams = {"add_sub x64": fast, f"slow ({lk.SLOW_S} s) x4": slow, "gRPC add_sub x8": rpc}
    figures = {
        "exit_s": exit_s,
        "exit_code": server.process.returncode if server.process is not None else None,
        "left_running_5s_after_exit": sorted(lk.comm(pid) for pid in server.seen if lk.alive(pid)),
        "others_gone_after_exit_s": others_gone,
        "answered_after_sigterm": sum(1 for t in streams.values() for at in t.answered_at if at >= signalled),
        "told_to_close": fast.told_to_close + slow.told_to_close,
        "more_load_s": more_load_s,
    }
    return streams, figures


def sigterm_notes(figures: dict[str, Any]) -> list[str]:
    exit_s = figures["exit_s"]
    head = f"exited {exit_s:.2f} s after SIGTERM" if exit_s is not None else "still running 45 s after SIGTERM"
    head += f" (code {figures['exit_code']})" if figures["exit_code"] is not None else ""
    head += f"; the clients kept sending until the exit or for {figures['more_load_s']:g} s"
    notes = [
        head,
        f"{figures['answered_after_sigterm']} requests answered after the signal; "
        f"{figures['told_to_close']} HTTP answers said Connection: close",
    ]
    left = figures["left_running_5s_after_exit"]
    if left:
        notes.append(f"still running 5 s after the exit: {', '.join(left)}")
    elif figures["others_gone_after_exit_s"]:
        notes.append(
            f"the last of its other processes was gone {figures['others_gone_after_exit_s']:.2f} s after the exit"
        )
    return notes


def case_sigterm(ctx: Context) -> None:
    repo = ctx.repo("drain", ["add_sub", "slow"])
    for kind, flags in ctx.kinds([[], ["--workers", "3"]]):
        server = ctx.start(kind, repo, flags)
        with lk.running(server):
            streams, figures = asyncio.run(sigterm_under_load(server, ctx.args.term_load, 45.0))
            for index, (name, tally) in enumerate(streams.items()):
                notes = sigterm_notes(figures) if index == 0 else []
                add_note(notes, describe(tally))
                ctx.add(Row(f"SIGTERM under load: {name}", server.label, tally, notes, figures))


# -- reload cycles --------------------------------------------------------------------------


async def control(
    conn: lk.Connection | None, server: lk.Server, request: bytes, tally: lk.Tally
) -> lk.Connection | None:
    """One request of the cycle on a kept-alive connection (opened again when closed)."""
    if conn is None or conn.closed:
        try:
            conn = await lk.connect(server.http)
        except (TimeoutError, OSError):
            tally.refused += 1
            return None
    tally.sent += 1
    try:
        response = await conn.request(request, 120.0)
    except lk.Lost as lost:
        tally.lost += 1
        tally.lost_why[lost.why] += 1
        conn.abort()
        return None
    tally.record(response)
    return None if response.close else conn


async def reload_cycles(server: lk.Server, cycles: int, cap_s: float) -> tuple[lk.Tally, lk.Tally, dict[str, Any]]:
    done = False
    load, tasks = lk.run_load(server.http, lk.infer("add_sub", lk.add_sub_json()), 32, lambda: done)
    await asyncio.sleep(WARM_S + BEFORE_S)
    rate_before = load.rate(time.monotonic() - BEFORE_S, time.monotonic())
    root = server.pid
    before = {"model_processes": len(lk.model_processes(root)), "rss_mib": lk.tree_rss_mib(root)}
    cycle_tally, times = lk.Tally(), []
    conn: lk.Connection | None = None
    started = time.monotonic()
    empty = lk.post("/v2/repository/models/reload_me/load", b"")
    unload = lk.post("/v2/repository/models/reload_me/unload", b"")
    probe = lk.infer("reload_me", lk.add_sub_json())
    for _ in range(cycles):
        if time.monotonic() - started > cap_s:
            break
        at = time.monotonic()
        for request in (empty, probe, unload):
            conn = await control(conn, server, request, cycle_tally)
        times.append(time.monotonic() - at)
    rate_during = load.rate(started, time.monotonic())
    # An unload may finish after its answer: give the last model process 5 s to go.
    await wait_for(lambda: len(lk.model_processes(root)) <= before["model_processes"], 5.0, every=0.1)
    done = True
    await asyncio.gather(*tasks)
    if conn is not None:
        conn.close()
    server.note_processes()
    after = {"model_processes": len(lk.model_processes(root)), "rss_mib": lk.tree_rss_mib(root)}
    figures = {
        "cycles": len(times),
        "cycle_s_median": statistics.median(times) if times else None,
        "cycle_s_max": max(times) if times else None,
        "before": before,
        "after": after,
        "load_rate": rate_during,
        "load_rate_before": rate_before,
        "cycle_requests": cycle_tally.counts(),
    }
    return load, cycle_tally, figures


def case_reload(ctx: Context) -> None:
    repo = ctx.repo("reload", ["add_sub", "reload_me"])
    flags = ["--model-control-mode", "explicit", "--load-model", "add_sub"]
    for kind, naiad_flags in ctx.kinds([flags]):
        triton_args = "--model-control-mode=explicit --load-model=add_sub"
        server = ctx.start(kind, repo, naiad_flags, triton_args=triton_args)
        with lk.running(server):
            load, cycles, figures = asyncio.run(reload_cycles(server, ctx.args.reload_cycles, 150.0))
            b, a = figures["before"], figures["after"]
            median = figures["cycle_s_median"]
            notes = [
                f"{figures['cycles']} cycles (load, infer, unload), median {median:.2f} s, "
                f"slowest {figures['cycle_s_max']:.2f} s; add_sub {figures['load_rate']:,.0f}/s meanwhile, "
                f"{figures['load_rate_before']:,.0f}/s before"
                if median is not None
                else "no cycle ran",
                f"cycle requests: sent {cycles.sent}, answered {cycles.answered}, failed {cycles.failed}, "
                f"lost {cycles.lost}, refused {cycles.refused}" + (f"; {describe(cycles)}" if describe(cycles) else ""),
                f"model processes {b['model_processes']} -> {a['model_processes']}; "
                f"RSS {mib(b['rss_mib'])} -> {mib(a['rss_mib'])}",
            ]
            add_note(notes, describe(load))
            label = f"{kind} (explicit, --load-model add_sub)"
            ctx.add(Row(f"{ctx.args.reload_cycles} reload cycles: add_sub x32", label, load, notes, figures))


# -- slow clients ---------------------------------------------------------------------------


@dataclass
class SlowKind:
    name: str
    count: int
    opened_at: list[float] = field(default_factory=list)
    conns: list[lk.Connection] = field(default_factory=list)
    refused: int = 0

    def closed_after(self) -> list[float]:
        return sorted(c.closed_at - t for c, t in zip(self.conns, self.opened_at) if c.by_server)

    def statuses(self) -> dict[int, int]:
        found: dict[int, int] = {}
        for conn in self.conns:
            if conn.buffer.startswith(b"HTTP/1."):
                status = int(bytes(conn.buffer[9:12]))
                found[status] = found.get(status, 0) + 1
        return found

    def summary(self, window_s: float) -> str:
        after = self.closed_after()
        text = f"{self.name} x{self.count}: "
        if not after:
            text += f"none closed by the server in {window_s:.0f} s"
        else:
            text += (
                f"{len(after)} closed by the server, after {after[0]:.1f}-{after[-1]:.1f} s "
                f"(median {statistics.median(after):.1f})"
            )
        statuses = self.statuses()
        if statuses:
            text += f"; answered {statuses}"
        if self.refused:
            text += f"; {self.refused} could not connect"
        return text


async def open_slow(server: lk.Server, kind: SlowKind, first: bytes, rcvbuf: int = 0, read: bool = True) -> None:
    """Opens `kind.count` connections and writes `first` on each; a client that does not read
    stops reading at once (its kernel buffer, `rcvbuf`, fills and stays full)."""
    for _ in range(kind.count):
        try:
            conn = await lk.connect(server.http, rcvbuf=rcvbuf)
        except (TimeoutError, OSError):
            kind.refused += 1
            continue
        assert conn.transport is not None
        if not read:
            conn.transport.pause_reading()
        conn.transport.write(first)
        kind.conns.append(conn)
        kind.opened_at.append(time.monotonic())


async def trickle(kind: SlowKind, until: Callable[[], bool]) -> None:
    while not until():
        await asyncio.sleep(1.0)
        for conn in kind.conns:
            if not conn.closed and conn.transport is not None:
                conn.transport.write(b"0")


class Memory:
    """The RSS of a server's processes, sampled every half second."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.samples: list[tuple[float, float]] = []

    async def sample(self, until: Callable[[], bool]) -> None:
        while not until():
            self.samples.append((time.monotonic(), lk.tree_rss_mib(self.root)))
            await asyncio.sleep(0.5)

    def peak(self) -> float:
        return max((m for _, m in self.samples), default=0.0)


async def slow_clients(
    server: lk.Server, window_s: float, setup: Callable[[lk.Server, Callable[[], bool]], list[asyncio.Task[None]]]
) -> tuple[lk.Tally, dict[str, float], float]:
    done = False
    memory = Memory(server.pid)
    before = lk.tree_rss_mib(server.pid)
    load, tasks = lk.run_load(server.http, lk.infer("add_sub", lk.add_sub_json()), 8, lambda: done)
    sampler = asyncio.create_task(memory.sample(lambda: done))
    await asyncio.sleep(WARM_S + 2.0)
    rate_before = load.rate(time.monotonic() - 2.0, time.monotonic())
    started = time.monotonic()
    helpers = setup(server, lambda: done)
    await asyncio.sleep(window_s)
    at_end = lk.tree_rss_mib(server.pid)
    rate_during = load.rate(started + 2.0, time.monotonic())
    done = True
    await asyncio.gather(*tasks, *helpers, sampler)
    return load, {"before": before, "peak": memory.peak(), "end": at_end}, rate_during / max(rate_before, 1e-9)


# Linux's TCP states (tcp_states.h) as TCP_INFO's first byte gives them: after the peer's FIN,
# and after its reset.
_TCP_CLOSE_WAIT = 8
_TCP_CLOSE = 7


async def watch_closes(kind: SlowKind, until: Callable[[], bool]) -> None:
    """A client that never reads does not see its connection closed (its transport does not
    read, and unread answer bytes sit before the end): every 0.5 s, each one still open asks
    the kernel for its TCP state. `closed_at` is then the look's time (up to 0.5 s late)."""
    while not until():
        await asyncio.sleep(0.5)
        for conn in kind.conns:
            sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
            if conn.closed or sock is None:
                continue
            state = socket.socket(fileno=os.dup(sock.fileno()))
            try:
                tcp_state = state.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
            except OSError:
                continue
            finally:
                state.close()
            if tcp_state in (_TCP_CLOSE, _TCP_CLOSE_WAIT):
                conn.closed, conn.by_server = True, True
                conn.reset = tcp_state == _TCP_CLOSE
                conn.closed_at = time.monotonic()


def close_all(kinds: list[SlowKind]) -> None:
    for kind in kinds:
        for conn in kind.conns:
            conn.abort()


HALF_HEAD = b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Ty"


def upload_head(length: int) -> bytes:
    """A request head announcing a body of `length` bytes (which the caller sends, or not)."""
    head = f"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: {lk.HOST}\r\nContent-Type: application/json\r\n"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % length


def case_slow_uploads(ctx: Context) -> None:
    repo = ctx.repo("basic", ["add_sub"])
    window = ctx.args.slow_window
    for kind, flags in ctx.kinds([[]]):
        server = ctx.start(kind, repo, flags)
        with lk.running(server):
            kinds = [SlowKind("half a head, then nothing", 32), SlowKind("head, then 1 body byte/s", 32)]
            kinds.append(SlowKind("40 of 48 MiB of body, then nothing", 8))

            def setup(
                server: lk.Server, until: Callable[[], bool], kinds: list[SlowKind] = kinds
            ) -> list[asyncio.Task[None]]:
                return [
                    asyncio.create_task(open_slow(server, kinds[0], HALF_HEAD)),
                    asyncio.create_task(
                        _then(open_slow(server, kinds[1], upload_head(1 << 20)), trickle(kinds[1], until))
                    ),
                    asyncio.create_task(open_slow(server, kinds[2], upload_head(48 << 20) + b"1" * (40 << 20))),
                ]

            load, memory, share = asyncio.run(_with_cleanup(slow_clients(server, window, setup), kinds))
            time.sleep(3.0)
            memory["after"] = lk.tree_rss_mib(server.pid)
            ctx.add(slow_row("slow uploads: add_sub x8 beside", server, load, memory, share, kinds, window))


async def _then(first: Any, second: Any) -> None:
    await first
    await second


async def _with_cleanup(body: Any, kinds: list[SlowKind]) -> Any:
    try:
        return await body
    finally:
        close_all(kinds)


def slow_row(
    case: str,
    server: lk.Server,
    load: lk.Tally,
    memory: dict[str, float],
    share: float,
    kinds: list[SlowKind],
    window: float,
) -> Row:
    notes = [kind.summary(window) for kind in kinds]
    notes.append(
        f"RSS of the server's processes: before {mib(memory['before'])}, peak {mib(memory['peak'])}, "
        f"end of window {mib(memory['end'])}, 3 s after the clients left {mib(memory['after'])}"
    )
    notes.append(f"add_sub rate while they were there: {share:.2f} of the rate before")
    add_note(notes, describe(load))
    figures = {
        "memory_mib": memory,
        "rate_share": share,
        "kinds": {
            k.name: {"count": k.count, "closed_after_s": k.closed_after(), "statuses": k.statuses()} for k in kinds
        },
    }
    return Row(case, server.label, load, notes, figures)


def case_slow_readers(ctx: Context) -> None:
    repo = ctx.repo("big", ["add_sub", "big"])
    window = ctx.args.reader_window
    pipelined = lk.infer("big", lk.big_json(4 << 20)) * 4  # four 16 MiB answers
    for kind, flags in ctx.kinds([[]]):
        server = ctx.start(kind, repo, flags)
        with lk.running(server):
            kinds = [SlowKind("4 requests for 16 MiB answers, never read", 16)]

            def setup(
                server: lk.Server, until: Callable[[], bool], kinds: list[SlowKind] = kinds
            ) -> list[asyncio.Task[None]]:
                return [
                    asyncio.create_task(open_slow(server, kinds[0], pipelined, rcvbuf=4096, read=False)),
                    asyncio.create_task(watch_closes(kinds[0], until)),
                ]

            load, memory, share = asyncio.run(_with_cleanup(slow_clients(server, window, setup), kinds))
            time.sleep(3.0)
            memory["after"] = lk.tree_rss_mib(server.pid)
            ctx.add(slow_row("slow readers: add_sub x8 beside", server, load, memory, share, kinds, window))


# -- idle connections -----------------------------------------------------------------------


async def open_idle(server: lk.Server, kind: SlowKind, request: bytes | None, parallel: int = 200) -> None:
    """Opens `kind.count` connections, `parallel` at a time; sends `request` on each and reads its
    answer when given (a keep-alive client between requests), else nothing."""
    gate = asyncio.Semaphore(parallel)

    async def one() -> None:
        async with gate:
            try:
                conn = await lk.connect(server.http, timeout=10.0)
                if request is not None:
                    await conn.request(request, 10.0)
            except (TimeoutError, OSError, lk.Lost):
                kind.refused += 1
                return
            kind.conns.append(conn)
            kind.opened_at.append(time.monotonic())

    await asyncio.gather(*(one() for _ in range(kind.count)))


async def idle_connections(
    server: lk.Server, count: int, window_s: float
) -> tuple[lk.Tally, list[SlowKind], dict[str, Any]]:
    done = False
    load, tasks = lk.run_load(server.http, lk.infer("add_sub", lk.add_sub_json()), 16, lambda: done)
    await asyncio.sleep(WARM_S + BEFORE_S)
    rate_before = load.rate(time.monotonic() - BEFORE_S, time.monotonic())
    rss_before = lk.tree_rss_mib(server.pid)
    kinds = [SlowKind("silent", count // 2), SlowKind("one GET, then idle keep-alive", count - count // 2)]
    opening = time.monotonic()
    try:
        await asyncio.gather(open_idle(server, kinds[0], None), open_idle(server, kinds[1], lk.get("/v2/health/live")))
        opened_s = time.monotonic() - opening
        held_from = time.monotonic()
        await asyncio.sleep(min(5.0, window_s))
        rate_during = load.rate(held_from, time.monotonic())
        rss_during = lk.tree_rss_mib(server.pid)
        await asyncio.sleep(max(0.0, window_s - 5.0))
        open_at_end = sum(1 for k in kinds for c in k.conns if not c.closed)
    finally:
        close_all(kinds)
    await asyncio.sleep(3.0)
    rss_after = lk.tree_rss_mib(server.pid)
    done = True
    await asyncio.gather(*tasks)
    figures = {
        "opened_s": opened_s,
        "rate_before": rate_before,
        "rate_during": rate_during,
        "rss_mib": {"before": rss_before, "during": rss_during, "after": rss_after},
        "open_at_end": open_at_end,
    }
    return load, kinds, figures


def case_idle(ctx: Context) -> None:
    repo = ctx.repo("basic", ["add_sub"])
    window = ctx.args.idle_window
    for kind, flags in ctx.kinds([[]]):
        server = ctx.start(kind, repo, flags)
        with lk.running(server):
            load, kinds, figures = asyncio.run(idle_connections(server, ctx.args.idle_count, window))
            rss = figures["rss_mib"]
            notes = [
                f"{ctx.args.idle_count} opened in {figures['opened_s']:.1f} s; "
                f"add_sub {figures['rate_before']:,.0f}/s before, {figures['rate_during']:,.0f}/s with them held",
                f"RSS {mib(rss['before'])} before, {mib(rss['during'])} with them, {mib(rss['after'])} 3 s after they closed",
                *(kind.summary(window) for kind in kinds),
                f"{figures['open_at_end']} still open after {window:.0f} s",
            ]
            add_note(notes, describe(load))
            figures["kinds"] = {
                k.name: {"count": k.count, "refused": k.refused, "closed_after_s": k.closed_after()} for k in kinds
            }
            ctx.add(Row(f"{ctx.args.idle_count} idle connections: add_sub x16", server.label, load, notes, figures))


# -- main -----------------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Context], None]] = {
    "start-burst": case_start_burst,
    "worker-kill": case_worker_kill,
    "stub-kill": case_stub_kill,
    "sigterm": case_sigterm,
    "reload": case_reload,
    "slow-uploads": case_slow_uploads,
    "slow-readers": case_slow_readers,
    "idle": case_idle,
}


def raise_file_limit(needed: int) -> None:
    """The idle case holds thousands of sockets here and in the server (which inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))


def _terminate_as_exit(signum: int, frame: object) -> None:
    # A SIGTERM unwinds like an exception, so the `finally` clauses stop the servers.
    raise SystemExit(128 + signum)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--no-triton", action="store_true", help="naiad only")
    parser.add_argument("--naiad", default=lk.default_naiad(), help="the naiad command (default: .venv's, else PATH's)")
    parser.add_argument(
        "--naiad-flags", default="", help="flags added to every naiad start (one word: --naiad-flags=--x)"
    )
    parser.add_argument("--bursts", type=int, default=20)
    parser.add_argument("--burst-size", type=int, default=64)
    parser.add_argument(
        "--term-load", type=float, default=2.0, help="seconds the clients go on sending after SIGTERM (default 2)"
    )
    parser.add_argument("--reload-cycles", type=int, default=50)
    parser.add_argument("--slow-window", type=float, default=35.0, help="seconds the slow uploaders stay (default 35)")
    parser.add_argument("--reader-window", type=float, default=20.0, help="seconds the slow readers stay (default 20)")
    parser.add_argument("--idle-count", type=int, default=5000)
    parser.add_argument(
        "--idle-window", type=float, default=35.0, help="seconds the idle connections stay (default 35)"
    )
    parser.add_argument("--triton-ports", type=int, nargs=3, default=[18300, 18301, 18302], metavar="PORT")
    parser.add_argument("--naiad-ports", type=int, nargs=3, default=[19300, 19301, 19302], metavar="PORT")
    parser.add_argument("--json", type=Path, help="write every row's figures to this file")
    return parser.parse_args()


def git_head() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=lk.ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_exit)
    raise_file_limit(2 * args.idle_count + 1024)
    loop = lk.use_uvloop()
    if not args.no_triton and not (lk.bench_dir() / "triton.sh").exists():
        print(f"{lk.bench_dir() / 'triton.sh'} is missing: set BENCH_DIR, or pass --no-triton")
        return 2
    print(
        f"naiad {git_head()}; {len(os.sched_getaffinity(0))} usable CPUs; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; client on {loop}",
        flush=True,
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="naiad-faults-") as tmp:
        ctx = Context(args, Path(tmp))
        print(HEADER, flush=True)
        for case in args.cases:
            case_start = time.monotonic()
            try:
                RUNNERS[case](ctx)
            except Exception as error:  # one case's failure should not hide the others' figures
                print(f"{case}: FAILED: {error}", file=sys.stderr, flush=True)
                for log in sorted(ctx.work.glob("*.log"))[-1:]:
                    print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
            print(f"    ({case}: {time.monotonic() - case_start:.0f} s)", flush=True)
        print(f"\nsummary ({time.monotonic() - started:.0f} s):")
        print(HEADER)
        for row in ctx.rows:
            print_row(row, notes=False)
        if args.json:
            record = [
                {"case": r.case, "server": r.server, **r.tally.counts(), "notes": r.notes, "figures": r.figures}
                for r in ctx.rows
            ]
            args.json.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
