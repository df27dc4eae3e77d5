"""The model process: ``python -m naiad_backend_python.model_side.stub --socket-fd N ...``.

The server starts one per model instance: forked from the stub template (stub_template.py),
which calls `main` with the same arguments, or spawned with this command line. `main`
builds the process's parts: the `Channel` to the server (stub_channel.py), the `StubBridge`
model code reaches the server through (stub_bridge.py), and the `StubDispatcher` that serves
the server's messages on the event loop (stub_dispatcher.py); the messages themselves are
in stub_messages.py.

It exits when the server asks (finalize), or when its socket closes (the server went away);
a watchdog thread sees the close even while model code is stuck in `execute`. Interrupt and
terminate signals are left to the server, as Triton's stub leaves them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
import threading
from pathlib import Path

from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from .bridge import set_default_bridge
from .model_host import run_auto_complete
from .stub_bridge import StubBridge
from .stub_channel import Channel, leave, watch_for_hang_up
from .stub_dispatcher import StubDispatcher

__all__ = ["main"]


def _auto_complete_main(model_file: str) -> int:
    """``--auto-complete FILE``: read a config JSON on stdin, write the completed one."""
    config = json.load(sys.stdin)
    try:
        result = run_auto_complete(Path(model_file), config, in_server=False)
    except Exception as exc:  # noqa: BLE001
        json.dump({"error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 0
    json.dump({"config": result}, sys.stdout)
    return 0


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where the model's interpreter has it (the server's always does): each
    execute costs the stub one wake-up of its loop, which uvloop turns several microseconds
    faster than asyncio's own. An EXECUTION_ENV_PATH environment without it gets asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _leave_stop_signals_to_the_server() -> None:
    """Ctrl-C, systemd's stop (KillMode=control-group) and `kill -- -PGID` signal the whole
    process group at once. They are for the server, which drains its requests, runs each
    model's `finalize` and then lets this process go. Dying here would cut the requests in
    flight and skip `finalize`. A handler that does nothing, not SIG_IGN, because an ignored
    signal would stay ignored in programs the model starts."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _server_handles_it)


def _server_handles_it(signum: int, frame: object) -> None:
    """The model process's handler of SIGINT and SIGTERM: nothing to do."""


def main(argv: list[str] | None = None) -> int:
    _leave_stop_signals_to_the_server()
    parser = argparse.ArgumentParser(prog="naiad_backend_python.model_side.stub")
    parser.add_argument("--socket-fd", type=int)
    parser.add_argument("--inbound-fd", type=int)
    parser.add_argument("--outbound-fd", type=int)
    parser.add_argument("--auto-complete", metavar="MODEL_FILE")
    args = parser.parse_args(argv)
    # Model code sees the command line Triton's stub leaves it (its embedded interpreter
    # has no arguments), so argparse and unittest.main() in a model parse nothing of ours.
    sys.argv = [""]
    if args.auto_complete:
        return _auto_complete_main(args.auto_complete)
    sock = socket.socket(fileno=args.socket_fd)
    channel = Channel(sock, RingReader(args.inbound_fd), RingWriter(args.outbound_fd))
    loop = _new_event_loop()
    asyncio.set_event_loop(loop)
    bridge = StubBridge(channel)
    set_default_bridge(bridge)
    dispatcher = StubDispatcher(channel, bridge, loop)
    threading.Thread(target=watch_for_hang_up, args=(sock,), daemon=True, name="naiad-stub-watchdog").start()
    loop.add_reader(sock.fileno(), dispatcher.read_ready)
    code = loop.run_until_complete(dispatcher.exit_code)
    # Model threads may still run; the server has what it needs, so leave now.
    leave(code)


if __name__ == "__main__":
    sys.exit(main())
