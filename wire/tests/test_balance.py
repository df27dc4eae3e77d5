"""naiad_wire.balance on its own: two balancers in one process stand in for two workers
(`naiad serve --workers`; the end-to-end test is backends/python/tests/test_workers.py)."""

from __future__ import annotations

import array
import asyncio
import socket

from naiad_wire.balance import ConnectionBalancer


class Echo(asyncio.Protocol):
    def __init__(self, name: str, served: list[str]) -> None:
        self.name = name
        self.served = served

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.served.append(self.name)

    def data_received(self, data: bytes) -> None:
        self.transport.write(self.name.encode() + b":" + data)  # type: ignore[attr-defined]


def test_a_burst_of_connections_ends_even_and_each_is_served_where_it_landed(tmp_path):
    async def go() -> None:
        served: list[str] = []
        first, second = ConnectionBalancer(str(tmp_path), 0, 2), ConnectionBalancer(str(tmp_path), 1, 2)
        loop = asyncio.get_running_loop()
        listeners = []
        for balancer, name in ((first, "a"), (second, "b")):
            balancer.start()
            factory = balancer.wrap(b"h", lambda name=name: Echo(name, served))
            listeners.append(await loop.create_server(factory, "127.0.0.1", 0))
        # Every connection reaches the first process (as an unlucky hash would have it).
        port = listeners[0].sockets[0].getsockname()[1]
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(6)]
        answers = []
        for reader, writer in streams:
            writer.write(b"ping")
            answers.append(await asyncio.wait_for(reader.read(100), 5))
        assert sorted(answers) == [b"a:ping"] * 3 + [b"b:ping"] * 3
        assert sorted(served) == ["a"] * 3 + ["b"] * 3
        for _, writer in streams:
            writer.close()
        for listener in listeners:
            listener.close()
        first.close()
        second.close()

    asyncio.run(go())


def test_what_is_not_a_handoff_is_closed_and_the_inbox_keeps_working(tmp_path):
    async def go() -> None:
        served: list[str] = []
        balancer = ConnectionBalancer(str(tmp_path), 0, 2)
        balancer.start()
        balancer.wrap(b"h", lambda: Echo("a", served))
        inbox = str(tmp_path / "handoff-0.sock")
        sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        strays = [socket.socketpair() for _ in range(4)]
        for message, (mine, _) in zip((b"", b"h\x07", b"x\x01", b"h\x00"), strays):
            # No sender, a sender out of range, a kind not served, this process itself.
            fds = array.array("i", [mine.fileno()])
            sender.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], 0, inbox)
        await asyncio.sleep(0.2)
        assert served == []
        for mine, theirs in strays:
            mine.close()  # ours; the copy the balancer received must be closed as well
            theirs.settimeout(5)
            assert theirs.recv(1) == b""  # every reference to the other end is gone
        sender.close()
        balancer.close()

    asyncio.run(go())


def test_a_process_started_again_carries_no_load_of_its_predecessor(tmp_path):
    """A worker that died with a connection passed to it and not adopted is started again:
    that connection is gone with it and must not count against the new process."""

    async def go() -> None:
        served: list[str] = []
        first, dying = ConnectionBalancer(str(tmp_path), 0, 2), ConnectionBalancer(str(tmp_path), 1, 2)
        first.start()  # `dying` never reads its inbox: what it is passed stays in flight
        dying.wrap(b"h", lambda: Echo("dead", served))
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(first.wrap(b"h", lambda: Echo("a", served)), "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        kept = await asyncio.open_connection("127.0.0.1", port)
        lost = await asyncio.open_connection("127.0.0.1", port)  # passed to `dying`
        await asyncio.sleep(0.1)
        dying.close()
        second = ConnectionBalancer(str(tmp_path), 1, 2)
        second.start()
        second.wrap(b"h", lambda: Echo("b", served))
        # The first holds one connection, the new second none: the next one goes there.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.read(100), 5) == b"b:ping"
        assert served == ["a", "b"]
        for stream in (kept, lost, (reader, writer)):
            stream[1].close()
        listener.close()
        first.close()
        second.close()

    asyncio.run(go())


def test_a_process_that_does_not_serve_a_kind_yet_is_passed_none_of_it(tmp_path):
    """A worker still loading its models (or started again and not listening yet) has its
    inbox but no frontend: a connection passed to it then would be closed unread, so every
    connection stays where it landed until that worker serves the kind, and is spread after."""

    async def go() -> None:
        served: list[str] = []
        first, second = ConnectionBalancer(str(tmp_path), 0, 2), ConnectionBalancer(str(tmp_path), 1, 2)
        first.start()
        second.start()
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(first.wrap(b"h", lambda: Echo("a", served)), "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        # The second serves gRPC only: it is no target for HTTP connections.
        second.wrap(b"g", lambda: Echo("grpc", served))
        early = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        answers = []
        for reader, writer in early:
            writer.write(b"ping")
            answers.append(await asyncio.wait_for(reader.read(100), 5))
        assert answers == [b"a:ping"] * 4
        # Once it serves HTTP, new connections even out.
        second.wrap(b"h", lambda: Echo("b", served))
        late = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        for reader, writer in late:
            writer.write(b"ping")
            assert await asyncio.wait_for(reader.read(100), 5) == b"b:ping"
        for _, writer in (*early, *late):
            writer.close()
        listener.close()
        first.close()
        second.close()

    asyncio.run(go())


class Movable(Echo):
    """An Echo whose client is asked to connect again: it answers "moved" once asked."""

    def __init__(self, name: str, served: list[str], moved: list[str]) -> None:
        super().__init__(name, served)
        self.moved = moved

    def move_on(self) -> None:
        self.moved.append(self.name)
        self.transport.close()  # type: ignore[attr-defined]


def test_a_process_holding_more_than_its_share_asks_the_excess_to_move_on(tmp_path):
    """Eight connections all held by the first process (the other was away, as a model home
    started again): once the second serves, the first asks four to move on, and no more while
    their clients connect again; those are passed to the second, and nothing moves after."""

    async def go() -> None:
        served: list[str] = []
        moved: list[str] = []
        first = ConnectionBalancer(str(tmp_path), 0, 2)
        first.start()
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(first.wrap(b"h", lambda: Movable("a", served, moved)), "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
        await asyncio.sleep(0.6)
        assert moved == []  # alone, nothing is more than its share
        second = ConnectionBalancer(str(tmp_path), 1, 2)
        second.start()
        second.wrap(b"h", lambda: Movable("b", served, moved))
        await asyncio.sleep(0.6)  # two looks at the counts at least, within the settling time
        assert moved == ["a"] * 4
        again = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        for reader, writer in again:
            writer.write(b"ping")
            assert await asyncio.wait_for(reader.read(100), 5) == b"b:ping"
        assert sum(await asyncio.gather(*(_closed(reader) for reader, _ in streams))) == 4
        await asyncio.sleep(1.5)
        assert moved == ["a"] * 4 and first.excess(b"h") == second.excess(b"h") == 0
        for _, writer in (*streams, *again):
            writer.close()
        listener.close()
        first.close()
        second.close()

    asyncio.run(go())


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.2) == b""
    except TimeoutError:
        return False
