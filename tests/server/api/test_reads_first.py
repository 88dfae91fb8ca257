"""A hive-lab read's steps at the head of the event loop's queue (``api/reads_first.py``, issue 40): once a
connection's latest request was a hive-lab read, its next request's bytes, parsing and handler run ahead of
the callbacks queued before them, so the read is answered in the turn its bytes arrive, not three turns later.

Through a real tornado HTTP server behind ``ShedAtConnection`` (which marks the connections), a client socket
written from inside a loop callback (so its bytes are there for the next turn's poll, whatever the machine's
speed), and a loop kept busy: a callback that calls itself again with ``call_soon`` counts the turns, and a
few hundred others queued in every turn stand for a flood's work."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import socket

import pytest
from tornado import httpserver, web
from tornado.netutil import bind_sockets

from hive_lab_server.api import reads_first
from hive_lab_server.api.connection_shedding import ShedAtConnection
from hive_lab_server.api.load_shedding import LoopLag, WriteBudget

PREFIX = "/hive_lab/api/"
BUSY = 300  # callbacks queued in every turn besides the counter


class BusyTurns:
    """Counts the loop's turns; keeps ``BUSY`` other callbacks queued in each."""

    def __init__(self):
        self.turn = 0
        self.running = True

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(self.tick)
        for _ in range(BUSY):
            loop.call_soon(self.work)

    def tick(self) -> None:
        self.turn += 1
        if self.running:
            asyncio.get_running_loop().call_soon(self.tick)

    def work(self) -> None:
        if self.running:
            asyncio.get_running_loop().call_soon(self.work)


async def turns_to_answer(install: bool, last: str) -> int:
    """Loop turns from the turn a client sends ``GET read`` on a kept-alive connection whose previous request
    was ``last`` ("read": a hive-lab GET, "write": a POST) to the turn its handler runs."""
    loop = asyncio.get_running_loop()
    if install:
        assert reads_first.install(loop)
    turns = BusyTurns()
    ran: list[int] = []

    class Read(web.RequestHandler):
        def get(self):
            ran.append(turns.turn)
            self.write("ok")

    class Write(web.RequestHandler):
        def post(self):
            self.write("ok")

    app = web.Application([(PREFIX + "read", Read), (PREFIX + "write", Write)])
    server = httpserver.HTTPServer(ShedAtConnection(app, PREFIX, WriteBudget(LoopLag(), 0, 0.0), lambda what: None))
    [sock] = bind_sockets(0, "127.0.0.1")
    server.add_sockets([sock])
    client = socket.create_connection(sock.getsockname()[:2])
    client.setblocking(False)

    async def answered() -> None:
        got = b""
        while b"\r\n\r\nok" not in got:
            got += await loop.sock_recv(client, 65536)

    try:
        first = (f"GET {PREFIX}read HTTP/1.1\r\nHost: t\r\n\r\n" if last == "read" else
                 f"POST {PREFIX}write HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
        client.send(first.encode())
        await answered()
        ran.clear()
        turns.start()
        await asyncio.sleep(0)
        sent: list[int] = []

        def send() -> None:  # (bytes on the loopback are there for the next poll)
            sent.append(turns.turn)
            client.send(f"GET {PREFIX}read HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        loop.call_soon(send)
        await answered()
        return ran[0] - sent[0]
    finally:
        turns.running = False
        client.close()
        server.stop()


@pytest.mark.parametrize("last", ["read", "write"])
@pytest.mark.parametrize("install", [True, False], ids=["reads_first", "plain"])
def test_a_reading_connections_request_is_answered_in_the_turn_its_bytes_arrive(install, last):
    hops = asyncio.run(turns_to_answer(install, last))
    if install and last == "read":
        assert hops <= 1, f"answered {hops} turns after its bytes were sent"
    else:  # the control: its bytes, its parsing and its handler each wait for a turn's queue
        assert hops >= 3, f"answered {hops} turns after its bytes were sent"


def _reading() -> contextvars.Context:
    ctx = contextvars.copy_context()
    ctx.run(reads_first.reading, True)
    return ctx


def test_reading_callbacks_go_ahead_of_the_queue_in_their_own_order():
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        assert reads_first.install(loop)
        assert reads_first.install(loop)  # (once is enough: a second install keeps it)
        order: list[str] = []
        for name in ("a", "b"):
            loop.call_soon(order.append, name)
        ctx = _reading()
        for name in ("r1", "r2"):
            loop.call_soon(order.append, name, context=ctx)
        loop.call_soon(order.append, "c")
        loop.call_soon(order.append, "r3", context=ctx)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert loop._ready.head == 0
        return order

    assert asyncio.run(main()) == ["r1", "r2", "r3", "a", "b", "c"]


def test_a_connection_that_writes_is_no_longer_a_reading_one():
    ctx = _reading()
    ctx.run(reads_first.reading, False)
    queue = reads_first.ReadsFirst()

    class Handle:
        _context = ctx
    queue.append("earlier")
    queue.append(Handle)
    assert list(queue) == ["earlier", Handle] and queue.head == 0


def test_a_loop_without_asyncios_queue_is_left_as_it_is():
    class OtherLoop:
        _ready = collections.deque(["x"])

    class NoQueue:
        pass
    other = OtherLoop()
    other._ready = [1]  # (not a deque: another implementation's)
    assert not reads_first.install(other) and other._ready == [1]
    assert not reads_first.install(NoQueue())
    kept = OtherLoop()
    kept._ready = collections.deque(["x", "y"])
    assert reads_first.install(kept) and list(kept._ready) == ["x", "y"]
    kept._ready.clear()
    assert kept._ready.head == 0
