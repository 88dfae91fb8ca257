"""While reads are about, each turn of the event loop lets in at most ``per_turn`` hive-lab writes
(``api/read_priority.WritesPerTurn``, issue 40), so a flood of writes cannot make the turns a read waits for
long; without reads about, writes are not held. Through a real tornado HTTP server and raw sockets: the
handlers record the loop turn they ran in (a callback that calls itself again with ``call_soon`` runs once
per turn)."""

from __future__ import annotations

import asyncio
import collections

import pytest
from tornado import httpserver, web
from tornado.netutil import bind_sockets

from hive_lab_server.api.connection_shedding import ShedAtConnection
from hive_lab_server.api.load_shedding import LoopLag, WriteBudget
from hive_lab_server.api.read_priority import WritesPerTurn

PREFIX = "/hive_lab/api/"
WRITES = 24


class TurnCounter:
    def __init__(self):
        self.turn = 0
        self.running = True

    def tick(self) -> None:
        self.turn += 1
        if self.running:
            asyncio.get_running_loop().call_soon(self.tick)


async def flood(writers: WritesPerTurn | None, read_first: bool) -> tuple[collections.Counter, list[int]]:
    """``WRITES`` POSTs sent at once on as many connections (after one GET when ``read_first``); returns the
    number of write handlers that ran in each loop turn, and the answers' statuses."""
    turns = TurnCounter()
    per_turn: collections.Counter = collections.Counter()

    class Write(web.RequestHandler):
        def post(self):
            per_turn[turns.turn] += 1
            self.write("ok")

    class Read(web.RequestHandler):
        def get(self):
            self.write("ok")

    app = web.Application([(PREFIX + "write", Write), (PREFIX + "read", Read)])
    budget = WriteBudget(LoopLag(), 0, 0.0)  # (no bound: nothing is shed here)
    server = httpserver.HTTPServer(ShedAtConnection(app, PREFIX, budget, lambda what: None, writers))
    [sock] = bind_sockets(0, "127.0.0.1")
    server.add_sockets([sock])
    port = sock.getsockname()[1]
    try:
        if read_first:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {PREFIX}read HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")
            writer.close()
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(WRITES)]
        turns.tick()
        for _, writer in conns:
            writer.write(f"POST {PREFIX}write HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n".encode())
        statuses = [int((await reader.readline()).split()[1]) for reader, _ in conns]
        for _, writer in conns:
            writer.close()
    finally:
        turns.running = False
        server.stop()
    return per_turn, statuses


@pytest.mark.parametrize("gated", [True, False])
def test_with_reads_about_a_turn_lets_in_at_most_per_turn_writes(gated):
    writers = WritesPerTurn(per_turn=4, window_s=1.0, clock=lambda: 0.0) if gated else None
    per_turn, statuses = asyncio.run(flood(writers, read_first=True))
    assert statuses == [200] * WRITES  # every write is served, in the end
    assert sum(per_turn.values()) == WRITES
    if gated:
        assert max(per_turn.values()) <= 4, per_turn
        assert writers.waited >= WRITES - 4 - 4  # (the first turn's writes and the next may go at once)
    else:  # the same flood without the gate: the writes crowd into a turn or two
        assert max(per_turn.values()) > 4, per_turn


def test_without_reads_about_writes_are_not_held():
    writers = WritesPerTurn(per_turn=4, window_s=1.0, clock=lambda: 0.0)  # (no read seen: none about)
    per_turn, statuses = asyncio.run(flood(writers, read_first=False))
    assert statuses == [200] * WRITES
    assert writers.waited == 0
    assert max(per_turn.values()) > 4, per_turn


def test_reads_are_about_for_the_window_after_the_last_one():
    now = [100.0]

    async def three_writes(writers: WritesPerTurn) -> list[str]:
        ran: list[str] = []
        for name in "abc":
            writers.start(lambda n=name: ran.append(n))
        ran.append("|")  # (this turn ends)
        for _ in range(3):
            await asyncio.sleep(0)
        return ran

    writers = WritesPerTurn(per_turn=1, window_s=1.0, clock=lambda: now[0])
    writers.read_seen()
    assert asyncio.run(three_writes(writers)) == ["a", "|", "b", "c"]  # one a turn, in order
    writers = WritesPerTurn(per_turn=1, window_s=1.0, clock=lambda: now[0])
    writers.read_seen()
    now[0] += 1.5  # the last read was 1.5 s ago
    assert asyncio.run(three_writes(writers)) == ["a", "b", "c", "|"]


def test_a_waiting_write_whose_connection_closes_is_dropped_quietly(caplog):
    """Writes queued for a turn whose clients hang up meanwhile cost nothing and log no error; the writes
    behind them are served."""

    async def main() -> list[int]:
        writers = WritesPerTurn(per_turn=1, window_s=1.0, clock=lambda: 0.0)
        writers.read_seen()
        served: list[int] = []

        class Write(web.RequestHandler):
            def post(self):
                served.append(1)
                self.write("ok")

        app = web.Application([(PREFIX + "write", Write)])
        server = httpserver.HTTPServer(ShedAtConnection(app, PREFIX, WriteBudget(LoopLag(), 0, 0.0),
                                                        lambda what: None, writers))
        [sock] = bind_sockets(0, "127.0.0.1")
        server.add_sockets([sock])
        port = sock.getsockname()[1]
        try:
            conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
            for _, writer in conns:
                writer.write(f"POST {PREFIX}write HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n".encode())
            await asyncio.sleep(0)
            for _, writer in conns[1:7]:  # (the first went at once; these wait in the queue)
                writer.close()
            statuses = [int((await reader.readline()).split()[1]) for reader, _ in (conns[0], conns[7])]
            conns[0][1].close()
            conns[7][1].close()
            while writers.queue:
                await asyncio.sleep(0)
            return statuses
        finally:
            server.stop()

    with caplog.at_level("ERROR"):
        assert asyncio.run(main()) == [200, 200]
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
