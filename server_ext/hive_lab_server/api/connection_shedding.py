"""Shedding writes at the connection (issue 40): when the write budget is spent, a hive-lab write is answered
503 + Retry-After from its start line and headers alone, before tornado makes a handler for it.

A write shed by ``HiveHandler.prepare`` still cost the event loop the whole request: its body read, a
handler, jupyter_server's authentication and ``prepare``, a log record. Under a flood of writes at twice the
sustainable rate most requests are such sheds, and that work kept the one loop busy, so reads waited behind
the refusals (p99 0.5-1.3 s). ``ShedAtConnection`` sits in front of the web application as the HTTP server's
connection delegate (tornado's ``HTTPServerConnectionDelegate``): for each request it looks at the start line
and the headers and either answers the 503 itself or hands the request on to the application unchanged.

A shed write's body is never parsed. A small one (at most ``DRAIN_MAX_BYTES``, with a Content-Length) is
read and dropped after the answer has been sent, so the client's keep-alive connection stays open (a
reconnect costs the loop more than the bytes); a larger, chunked or ``Expect: 100-continue`` one is not read
at all: the connection is closed after the answer (``Connection: close``), as tornado does for any answer
sent before its request's body.

A submit (``POST .../jobs``, not a dry run) that the service would refuse anyway because it holds
``max_unfinished_jobs`` unfinished jobs (``full``) is answered here the same way once its write's turn has
come (``read_priority``), with the 503 and the Retry-After its handler would have sent: under a flood that
reaches the bound, most submits are such refusals, and each cost the loop a whole request (its body parsed, a
handler, the spec validated) before admission said no. (Answered before its turn, the flood's clients sent
their next requests at once: bench_reads' jobs ended 27/s instead of 80/s, reads' p50 1.24x.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Awaitable

from tornado import httputil

from hive_lab_server.api import reads_first
from hive_lab_server.api.load_shedding import WRITES, WriteBudget
from hive_lab_server.errors import ServiceError
from hive_lab_server.api.read_priority import WritesPerTurn

DRAIN_MAX_BYTES = 64 * 1024  # a job spec is ~1 KiB; a bigger body is not worth keeping the connection for


class ShedAtConnection(httputil.HTTPServerConnectionDelegate):
    """The HTTP server's delegate: writes (POST, PUT, PATCH) to ``prefix`` are answered 503 here while
    ``budget.full()``; every other request goes to ``app`` (the tornado application) as before.
    ``on_shed(what)`` counts and logs each shed (what: "POST /hive_lab/api/jobs"). ``writers``, when given,
    lets writes into the loop a few per turn (``read_priority``), before anything else is decided about them.
    ``full()``, when given, is the refusal a submit gets now (the service holds ``max_unfinished_jobs``),
    else None; ``on_refused()`` counts each submit refused so."""

    def __init__(self, app: httputil.HTTPServerConnectionDelegate, prefix: str, budget: WriteBudget,
                 on_shed: Callable[[str], None], writers: WritesPerTurn | None = None,
                 full: Callable[[], ServiceError | None] | None = None,
                 on_refused: Callable[[], None] | None = None):
        self.app = app
        self.prefix = prefix
        self.budget = budget
        self.on_shed = on_shed
        self.writers = writers
        self.full = full
        self.on_refused = on_refused
        self._submit_path = prefix + "jobs"

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection) -> httputil.HTTPMessageDelegate:
        return _FirstLook(self, server_conn, request_conn)

    def on_close(self, server_conn: object) -> None:
        self.app.on_close(server_conn)

    def is_write(self, start_line: httputil.RequestStartLine) -> bool:
        return start_line.method in WRITES and start_line.path.startswith(self.prefix)

    def sheds(self, start_line: httputil.RequestStartLine) -> bool:
        return self.is_write(start_line) and self.budget.full()

    def refusal(self, start_line: httputil.RequestStartLine) -> ServiceError | None:
        """The refusal a submit gets now from a full service (None: not a submit, or room for it)."""
        if self.full is None or start_line.method != "POST":
            return None
        path, _, query = start_line.path.partition("?")
        if path.rstrip("/") != self._submit_path or "dry_run" in query:
            return None
        return self.full()


class _FirstLook(httputil.HTTPMessageDelegate):
    """One request: shed from its headers, or passed to the application's own delegate from then on."""

    def __init__(self, shedder: ShedAtConnection, server_conn: object, request_conn: httputil.HTTPConnection):
        self.shedder = shedder
        self.server_conn = server_conn
        self.request_conn = request_conn
        self.inner: httputil.HTTPMessageDelegate | None = None
        self.answered = False  # shed, and the answer finished

    def headers_received(self, start_line: Any, headers: httputil.HTTPHeaders) -> Awaitable[None] | None:
        writers = self.shedder.writers
        write = self.shedder.is_write(start_line)
        hive_read = not write and start_line.path.startswith(self.shedder.prefix)
        reads_first.reading(hive_read)  # (this connection's task: its next steps, and its next request's)
        if writers is None:
            return self._decide(start_line, headers)
        if not write:
            if hive_read:
                writers.read_seen()
            return self._decide(start_line, headers)
        if writers.room():
            writers.take()
            return self._decide(start_line, headers)
        return self._decide_in_turn(writers, start_line, headers)

    async def _decide_in_turn(self, writers: WritesPerTurn, start_line: Any, headers: httputil.HTTPHeaders) -> None:
        turn = asyncio.get_running_loop().create_future()
        writers.start(lambda: turn.done() or turn.set_result(None))
        await turn
        decided = self._decide(start_line, headers)
        if decided is not None:
            await decided

    def _decide(self, start_line: Any, headers: httputil.HTTPHeaders) -> Awaitable[None] | None:
        # (a submit refused waits for its write's turn all the same: answered at once, a flood's clients
        # would send their next requests at once, and the loop spent more on those than it saved)
        refused = self.shedder.refusal(start_line)
        if refused is not None:
            if self.shedder.on_refused is not None:
                self.shedder.on_refused()
            self._answer(headers, refused.message, refused.retry_after_s)
            return None
        if not self.shedder.sheds(start_line):
            self.inner = self.shedder.app.start_request(self.server_conn, self.request_conn)
            return self.inner.headers_received(start_line, headers)
        self.shedder.on_shed(f"{start_line.method} {start_line.path.split('?', 1)[0]}")
        self._answer(headers, self.shedder.budget.shed_message(), 1)
        return None

    def _answer(self, headers: httputil.HTTPHeaders, message: str, retry_after_s: float | None) -> None:
        """A 503 with ``message`` and Retry-After, sent from the request's headers alone."""
        length = headers.get("Content-Length", "")
        drain = (length.isdigit() and int(length) <= DRAIN_MAX_BYTES
                 and "Transfer-Encoding" not in headers and "Expect" not in headers)
        body = json.dumps({"error": message, "field": None}).encode()
        answer = httputil.HTTPHeaders({"Content-Type": "application/json",
                                       "Retry-After": str(max(1, int(retry_after_s or 1))),
                                       "Content-Length": str(len(body))})
        if not drain:
            answer["Connection"] = "close"
        self.request_conn.write_headers(httputil.ResponseStartLine("HTTP/1.1", 503, "Service Unavailable"),
                                        answer, body)
        if not drain:  # tornado closes the connection without reading the body
            self._finish()

    def data_received(self, chunk: bytes) -> Awaitable[None] | None:
        if self.inner is not None:
            return self.inner.data_received(chunk)
        return None  # a shed write's body: dropped unparsed

    def finish(self) -> None:
        if self.inner is not None:
            self.inner.finish()
        else:
            self._finish()

    def on_connection_close(self) -> None:
        if self.inner is not None:
            self.inner.on_connection_close()

    def _finish(self) -> None:
        if not self.answered:
            self.answered = True
            self.request_conn.finish()


def install(serverapp: Any, budget: WriteBudget, on_shed: Callable[[str], None],
            writers: WritesPerTurn | None = None, full: Callable[[], ServiceError | None] | None = None,
            on_refused: Callable[[], None] | None = None) -> bool:
    """Put a ``ShedAtConnection`` in front of ``serverapp``'s web application (its HTTP server asks its
    delegate for each request, so requests from then on pass through it). False when the server has no
    HTTP server of its own (embedded without one)."""
    try:
        server = serverapp.http_server
    except AttributeError:
        return False
    if isinstance(server.request_callback, ShedAtConnection):
        return True
    prefix = serverapp.base_url.rstrip("/") + "/hive_lab/api/"
    server.request_callback = ShedAtConnection(server.request_callback, prefix, budget, on_shed, writers, full,
                                               on_refused)
    return True
