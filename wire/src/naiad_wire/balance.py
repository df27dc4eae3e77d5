"""Even connection counts across the processes that share a port with SO_REUSEPORT.

The kernel hashes each new connection to one of the listening processes. With few clients
that is far from even: 8 connections over 2 processes split 6/2 or worse more often than
4/4 (p = 0.29 against 0.27), and the busier process sets the pace of every client it holds.
So a process that accepts a connection while it holds more of that kind than another one
passes the socket on, before reading a byte of it: the file descriptor travels over a Unix
datagram socket (SCM_RIGHTS) to the other process, which adopts it as if it had accepted it.
Clients see nothing of this; the kernel's hash still does most of the work, so few sockets
move. TLS listeners are not balanced (the handshake has begun by the time a protocol sees
the connection).

Each process counts in a small shared file, in slots only it writes: its open connections
of each kind, how many it passed to each other process, and how many it adopted from each.
A connection passed and not adopted yet counts as already where it goes. Deciding and
counting is one step under a lock on the file: in a burst, both processes accept at once,
and neither may decide on counts the other is about to change. A process started again
starts with no load. A handoff that cannot be delivered (the other process is gone) keeps the
connection where it is.

Connections that stay open would stay where they first landed: when a process dies, its
clients reconnect to the others, and when it is back it would get only new clients. Measured
with two workers: the 32 connections of a killed model home all went to worker 0 and stayed
there, so every request crossed from one process to the other from then on (no return to 80%
of the rate within 15 s). So each process looks at the counts every `_REBALANCE_S` and, when it
holds more than its share by `_SLACK` or more, asks that many of its connections to move on
(`Connection.move_on`: `Connection: close` on the next answer, or HTTP/2's GOAWAY); their
clients connect again and are balanced as new ones. Nothing is lost: a connection with nothing
to answer is never closed for this.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import logging
import mmap
import os
import socket
import struct
from collections.abc import Callable, Iterator
from typing import cast

__all__ = ["ConnectionBalancer", "install", "balanced", "retire"]

log = logging.getLogger("naiad.wire")

# How often a process looks for more connections than its share; how many more than its share
# (rounded up) it may hold before it asks some to move on, not fewer than _SLACK_MIN: clients
# that close their own connections unevenly should not set the others' moving.
_REBALANCE_S = 0.25
_SLACK = 0.125
_SLACK_MIN = 2
# After asking, a process waits this long before it asks again: the clients that moved on
# connect again when they next send, and are not counted anywhere meanwhile.
_SETTLE_S = 1.0

# The kinds of connection balanced, each with its slots in the count file.
_KINDS = (b"h", b"g")  # HTTP, gRPC
_SLOT = struct.Struct("<q")

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


class ConnectionBalancer:
    """Process `index` of `count`, with its count file and inbox in `directory`."""

    def __init__(self, directory: str, index: int, count: int) -> None:
        self.index = index
        self.count = count
        self._directory = directory
        self._factories: dict[bytes, ProtocolFactory] = {}
        # Per kind: `count` open-connection slots, then count x count passed, then adopted,
        # then `count` flags: whether each process serves that kind yet.
        self._per_kind = 2 * count + 2 * count * count
        size = _SLOT.size * self._per_kind * len(_KINDS)
        # The file is also the lock that makes a decision and its count one step: two
        # processes accepting at once must not both decide on the same stale counts.
        self._file = os.open(os.path.join(directory, "connections"), os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(self._file).st_size < size:
            os.ftruncate(self._file, size)
        self._counts = mmap.mmap(self._file, size)
        # A process started again (a worker restarted after it died): nothing of its
        # predecessor is open, and what others passed it is gone with it; counting those as
        # adopted keeps them from weighing on its load. What the predecessor passed stays
        # counted: the others adopt it, or have.
        with self._decision():
            for kind in _KINDS:
                self._write(self._open(kind, index), 0)
                self._write(self._serving(kind, index), 0)
                for sender in range(count):
                    self._write(self._adopted(kind, index, sender), self._read(self._passed(kind, sender, index)))
        self._inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        path = self._inbox_path(index)
        if os.path.exists(path):
            os.unlink(path)
        self._inbox.bind(path)
        self._inbox.setblocking(False)
        self._outbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._outbox.setblocking(False)
        self._loop: asyncio.AbstractEventLoop | None = None
        # This process's open connections of each kind, and those asked to move on.
        self._connections: dict[bytes, set[asyncio.BaseProtocol]] = {kind: set() for kind in _KINDS}
        self._moving: set[asyncio.BaseProtocol] = set()
        self._rebalancing: asyncio.TimerHandle | None = None
        self._settled_at = 0.0

    def _inbox_path(self, index: int) -> str:
        return os.path.join(self._directory, f"handoff-{index}.sock")

    # The byte offsets of the slots: open connections of process `index`; how many
    # `sender` passed to `receiver`; how many `receiver` adopted from `sender`.
    def _open(self, kind: bytes, index: int) -> int:
        return (_KINDS.index(kind) * self._per_kind + index) * _SLOT.size

    def _passed(self, kind: bytes, sender: int, receiver: int) -> int:
        return self._open(kind, self.count + sender * self.count + receiver)

    def _adopted(self, kind: bytes, receiver: int, sender: int) -> int:
        return self._open(kind, self.count + self.count * self.count + receiver * self.count + sender)

    def _serving(self, kind: bytes, index: int) -> int:
        return self._open(kind, self.count + 2 * self.count * self.count + index)

    def _read(self, offset: int) -> int:
        return int(_SLOT.unpack_from(self._counts, offset)[0])

    def _write(self, offset: int, value: int) -> None:
        _SLOT.pack_into(self._counts, offset, value)

    def _add(self, offset: int, delta: int) -> None:
        self._write(offset, self._read(offset) + delta)

    def _load(self, kind: bytes, index: int) -> int:
        """Process `index`'s connections of `kind`, with those passed to it and not adopted
        yet (by any process: this one's own inbox may hold some)."""
        load = self._read(self._open(kind, index))
        for sender in range(self.count):
            if sender != index:
                load += self._read(self._passed(kind, sender, index)) - self._read(self._adopted(kind, index, sender))
        return load

    def _loads_and_serving(self, kind: bytes) -> tuple[list[int], list[int]]:
        """Every process's load of `kind`, and the processes serving it (this one always);
        read under `_decision`."""
        loads = [self._load(kind, i) for i in range(self.count)]
        serving = [i for i in range(self.count) if i == self.index or self._read(self._serving(kind, i))]
        return loads, serving

    @contextlib.contextmanager
    def _decision(self) -> Iterator[None]:
        fcntl.flock(self._file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._file, fcntl.LOCK_UN)

    def start(self) -> None:
        """Adopt what other processes pass, on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._inbox.fileno(), self._receive)
        self._rebalancing = self._loop.call_later(_REBALANCE_S, self._rebalance)

    def wrap(self, kind: bytes, factory: ProtocolFactory) -> ProtocolFactory:
        """The factory to give the listener: it keeps or passes on each new connection, and
        `factory` serves those kept and those adopted. From now on, the other processes may
        pass this one connections of `kind`: before, it could not serve them (a process
        still loading its models, or started again after a crash)."""
        self._factories[kind] = factory
        with self._decision():
            self._write(self._serving(kind, self.index), 1)
        return lambda: _Arrival(self, kind)

    def retire(self) -> None:
        """This process is stopping: the others pass it nothing from now on."""
        with self._decision():
            for kind in _KINDS:
                self._write(self._serving(kind, self.index), 0)

    # -- a connection accepted here ------------------------------------------------------------

    def _arrived(self, kind: bytes, transport: asyncio.Transport) -> None:
        with self._decision():
            loads, serving = self._loads_and_serving(kind)
            target = min(serving, key=loads.__getitem__)
            if loads[target] < loads[self.index] and self._pass(kind, transport, target):
                return
            protocol = self._counted(kind, self._factories[kind]())
        transport.set_protocol(protocol)
        protocol.connection_made(transport)

    def _pass(self, kind: bytes, transport: asyncio.Transport, target: int) -> bool:
        sock = transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            self._outbox.sendmsg(
                [kind + bytes([self.index])],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sock.fileno()]))],
                0,
                self._inbox_path(target),
            )
        except OSError:
            return False  # that process is gone or its inbox is full: keep it
        self._add(self._passed(kind, self.index, target), 1)
        # The other process holds the socket now: closing ours sends nothing to the client.
        transport.abort()
        return True

    def _counted(self, kind: bytes, protocol: asyncio.BaseProtocol) -> asyncio.BaseProtocol:
        slot = self._open(kind, self.index)
        self._add(slot, 1)
        lost = protocol.connection_lost
        connections = self._connections[kind]
        connections.add(protocol)

        def connection_lost(exc: Exception | None) -> None:
            self._add(slot, -1)
            connections.discard(protocol)
            self._moving.discard(protocol)
            lost(exc)

        protocol.connection_lost = connection_lost  # type: ignore[method-assign]
        return protocol

    # -- more than its share ------------------------------------------------------------------

    def _rebalance(self) -> None:
        assert self._loop is not None
        self._rebalancing = self._loop.call_later(_REBALANCE_S, self._rebalance)
        if self._loop.time() < self._settled_at:
            return
        for kind, connections in self._connections.items():
            excess = self.excess(kind) - len(self._moving & connections)
            for connection in list(connections - self._moving)[: max(excess, 0)]:
                move_on = getattr(connection, "move_on", None)
                if move_on is not None:
                    self._moving.add(connection)
                    self._settled_at = self._loop.time() + _SETTLE_S
                    move_on()

    def excess(self, kind: bytes) -> int:
        """How many connections of `kind` this process holds beyond its share among the
        processes serving that kind; 0 within the slack."""
        with self._decision():
            loads, serving = self._loads_and_serving(kind)
        share = -(-sum(loads[i] for i in serving) // len(serving))
        excess = loads[self.index] - share
        return excess if excess >= max(_SLACK_MIN, int(share * _SLACK)) else 0

    # -- a connection passed here --------------------------------------------------------------

    def _receive(self) -> None:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self._inbox, 16, 1)
            except (BlockingIOError, InterruptedError):
                return
            kind, sender = message[:1], message[1] if len(message) == 2 else -1
            for fd in fds:
                sock = socket.socket(fileno=fd)
                factory = self._factories.get(kind)
                if factory is None or self._loop is None or not 0 <= sender < self.count or sender == self.index:
                    sock.close()  # not a handoff of a kind this process serves (any more)
                    continue
                sock.setblocking(False)
                asyncio.ensure_future(self._adopt(kind, sender, sock, factory))

    async def _adopt(self, kind: bytes, sender: int, sock: socket.socket, factory: ProtocolFactory) -> None:
        assert self._loop is not None
        adopted = self._adopted(kind, self.index, sender)
        done = False

        def protocol() -> asyncio.BaseProtocol:
            # Open and no longer in flight, in one step: the load others see does not move.
            nonlocal done
            with self._decision():
                self._add(adopted, 1)
                done = True
                return self._counted(kind, factory())

        try:
            await self._loop.connect_accepted_socket(protocol, sock)
        except OSError as exc:
            log.debug("a connection passed from another process was already closed: %s", exc)
            sock.close()
        finally:
            if not done:
                self._add(adopted, 1)

    def close(self) -> None:
        if self._rebalancing is not None:
            self._rebalancing.cancel()
        if self._loop is not None:
            self._loop.remove_reader(self._inbox.fileno())
        self._inbox.close()
        self._outbox.close()
        self._counts.close()
        os.close(self._file)


class _Arrival(asyncio.Protocol):
    """What the listener makes for a new connection: it is kept here (served by the real
    protocol, which takes the transport over) or passed on, in `connection_made`."""

    def __init__(self, balancer: ConnectionBalancer, kind: bytes) -> None:
        self._balancer = balancer
        self._kind = kind

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self._balancer._arrived(self._kind, cast(asyncio.Transport, transport))


_installed: ConnectionBalancer | None = None


def install(balancer: ConnectionBalancer | None) -> None:
    """The balancer the listeners of this process use (None: none)."""
    global _installed
    _installed = balancer


def retire() -> None:
    """The installed balancer's process is stopping (nothing when none is installed)."""
    if _installed is not None:
        _installed.retire()


def balanced(kind: bytes, factory: ProtocolFactory) -> ProtocolFactory:
    """`factory` balanced by the installed balancer, or as it is when none is installed."""
    if _installed is None:
        return factory
    return _installed.wrap(kind, factory)
