"""Splits a py-spy raw profile (`py-spy record -f raw --threads`) of naiad into the phases of
a request: parse, validate, schedule, IPC to the Python model process, execute, encode,
and the transport (uvicorn/httptools or grpc.aio's core and poller thread).

    python bench/profile_breakdown.py PROFILE.txt [REQUESTS CPU_SECONDS]

With the request count and the CPU seconds the process used while sampled, it also prints
microseconds of CPU per request for each phase."""

from __future__ import annotations

import collections
import sys

# First match wins, checked from the innermost frame outwards.
PHASES = [
    ("encode", ("encode_infer_response", "encode_raw_response")),
    ("validate", ("validate_request",)),
    ("parse", ("decode_infer_request", "decode_raw_request", "InferenceServicer._decode", "BodyReader.read")),
    ("IPC to model process", ("ProcessInstance.execute", "StubConnection.", "RingWriter", "RingReader")),
    ("execute (in process)", ("InProcessInstance.execute", "TritonPythonModel.execute")),
    (
        "schedule",
        (
            "Server._submit",
            "DynamicBatcher.",
            "InstanceRunner.",
            "Job.",
            "Server.infer",
            "PriorityQueue",
            "BatchPolicy",
            "_select_outputs",
        ),
    ),
    (
        "frontend glue",
        ("NaiadHttpApp", "InferEndpoint", "_unless_disconnected", "_DisconnectWatch", "InferenceServicer.", "_unary"),
    ),
    ("HTTP server (uvicorn/httptools)", ("uvicorn/",)),
    ("gRPC core (grpc.aio, poller thread)", ("_poll_wrapper", "grpc/")),
]


def phase_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for phase, markers in PHASES:
            if any(m in frame for m in markers):
                return phase
    if frames and "Runner.run" in frames[-1]:
        return "event loop + native code (uvloop, grpc core)"
    return "other"


def main() -> None:
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in open(sys.argv[1]):
        stack, _, n = line.rstrip().rpartition(" ")
        if not n.isdigit():
            continue
        counts[phase_of(stack.split(";"))] += int(n)
        total += int(n)
    per_request = None
    if len(sys.argv) > 3:
        per_request = float(sys.argv[3]) / float(sys.argv[2]) * 1e6
    for phase, n in counts.most_common():
        share = n / total
        extra = f"  {share * per_request:6.1f} us/request" if per_request else ""
        print(f"{100 * share:5.1f}%  {phase}{extra}")
    if per_request:
        print(f"server CPU per request: {per_request:.1f} us")


if __name__ == "__main__":
    main()
