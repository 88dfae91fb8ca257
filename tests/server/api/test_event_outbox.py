"""The events outbox bounds what the server really holds for a subscriber that never reads: a real tornado
websocket server, a real client socket that never reads, the real EventBus and Outbox, and the memory
the process allocates for it measured with tracemalloc (not the outbox's own count)."""

import asyncio
import socket
import tracemalloc

import pytest
import tornado.web
import tornado.websocket
import websocket

from hive_lab_server.api.event_outbox import SLOW_CONSUMER, Outbox
from hive_lab_server.wire.events import EventBus

LIMIT = 512 * 1024


class Subscriber(tornado.websocket.WebSocketHandler):
    """What EventsHandler does with its outbox, without the Jupyter server around it."""

    def initialize(self, bus, seen):
        self.bus, self.seen = bus, seen

    def open(self):
        # the kernel's own buffers for this socket stay small: what piles up is the server process's
        self.ws_connection.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        self.outbox = Outbox(LIMIT, self.write_message, self.overflow)
        self.unsubscribe = self.bus.subscribe(self.outbox.put)
        self.seen["opened"].set()

    def overflow(self, held):
        self.seen.update(held=held, traced=tracemalloc.get_traced_memory()[0])
        self.unsubscribe()
        self.close(SLOW_CONSUMER, "slow consumer")

    def on_close(self):
        self.outbox.close()


@pytest.mark.timeout(120)
async def test_a_never_reading_subscriber_is_closed_at_its_byte_limit():
    bus = EventBus()
    seen = {"opened": asyncio.Event()}
    app = tornado.web.Application([(r"/events", Subscriber, {"bus": bus, "seen": seen})])
    server = app.listen(0, "127.0.0.1")
    port = next(iter(server._sockets.values())).getsockname()[1]
    loop = asyncio.get_running_loop()
    client = await loop.run_in_executor(None, lambda: websocket.create_connection(
        f"ws://127.0.0.1:{port}/events", sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),)))
    tracemalloc.start()
    try:
        await seen["opened"].wait()
        baseline = tracemalloc.get_traced_memory()[0]
        published = 0
        while "held" not in seen:
            assert published < 100_000, "the outbox kept buffering for a subscriber that never reads"
            for _ in range(50):  # state messages as the service publishes them (~290 bytes of JSON)
                bus.publish({"type": "state", "job": f"j-{published:08d}", "state": "running",
                             "at": "2026-11-27T16:00:00Z", "reason": "x" * 160})
                published += 1
            await asyncio.sleep(0)  # the socket takes what it can (it never takes much: nobody reads)
        held_in_memory = seen["traced"] - baseline
        assert LIMIT * 0.9 < seen["held"] <= LIMIT  # closed at its limit, not before
        # what the process really allocated for the subscriber stays within its limit (the outbox counts
        # what it holds: before, it counted text lengths and the process held ~6x its limit)
        assert held_in_memory <= LIMIT * 1.1, (held_in_memory, seen["held"], published)
    finally:
        tracemalloc.stop()
        client.close()
        server.stop()
