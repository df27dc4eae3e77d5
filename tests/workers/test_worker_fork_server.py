"""The fork server (naiad.workers.fork_server): a worker it forks is a child of the process
that asked, runs the main it was given with the environment and arguments of the request, and
tells it when it serves through its ready pipe; what is orphaned under that process is reaped.

Each case runs in a fresh interpreter: the fork server must be made while its maker has one
thread, which pytest's process does not promise."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from naiad.workers.fork_server import ForkServer, reap_adopted

    def main(argv):
        # What the worker saw, written where the test reads it.
        with open(argv[0], "w") as out:
            json.dump({"argv": argv, "ppid": os.getppid(), "role": os.environ.get("ROLE"),
                       "pgid_is_own": os.getpgid(0) == os.getpid()}, out)
        os.write(int(os.environ["NAIAD_WORKER_READY_FD"]), b"1")
        return 7

    forker = ForkServer.start(main)
    assert forker is not None, "no fork server"
    read_end, write_end = os.pipe()
    pid = forker.fork([sys.argv[1], "--flag"], {"ROLE": "home"}, True, write_end)
    os.close(write_end)
    ready = os.read(read_end, 1)
    _, status = os.waitpid(pid, 0)
    # A grandchild orphaned under this process (the subreaper) comes here to be reaped.
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            time.sleep(0.2)
            os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    time.sleep(0.6)
    reaped = reap_adopted([forker.pid])
    forker.close()
    print(json.dumps({"me": os.getpid(), "pid": pid, "ready": ready.decode(),
                      "code": os.waitstatus_to_exitcode(status), "reaped": reaped}))
""")


def test_a_forked_worker_is_the_askers_child_and_runs_main(tmp_path: Path) -> None:
    seen_path = tmp_path / "seen.json"
    run = subprocess.run([sys.executable, "-c", _SCRIPT, str(seen_path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    seen = json.loads(seen_path.read_text())
    assert result["ready"] == "1" and result["code"] == 7
    assert seen == {"argv": [str(seen_path), "--flag"], "ppid": result["me"], "role": "home", "pgid_is_own": True}
    assert result["reaped"] == 1
