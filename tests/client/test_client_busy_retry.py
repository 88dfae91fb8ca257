"""The client sends a request the server shed (503 with Retry-After: nothing was done) again after the
pause the server asks for, up to ``busy_retry_s`` of pauses in all; any other error is raised at once.

Against a real HTTP server on localhost scripted to answer 503 first; the pauses are recorded by an
injected sleep (no wall clock)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hive_lab.client import Client
from hive_lab.errors import ServerError


class Scripted(BaseHTTPRequestHandler):
    answers: list = []  # (status, headers, body) per request, in order; the last one repeats
    seen: list = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).seen.append((self.command, self.path, body))
        status, headers, payload = self.answers[min(len(self.seen) - 1, len(self.answers) - 1)]
        data = json.dumps(payload).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # (quiet)
        pass


@pytest.fixture
def server():
    Scripted.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def client(url: str, **kw) -> tuple[Client, list[float]]:
    c = Client(url, token="t", **kw)
    pauses: list[float] = []
    c._sleep = pauses.append
    return c, pauses


BUSY = (503, {"Retry-After": "5"}, {"error": "hive-lab holds 10000 unfinished jobs; retry in 5 s"})


def test_a_shed_submit_is_sent_again_after_the_pause_the_server_asked_for(server):
    Scripted.answers = [BUSY, BUSY, (201, {}, {"id": "j-000001", "state": "queued"})]
    c, pauses = client(server)
    assert c._request("POST", "jobs", json={"command": "true"})["id"] == "j-000001"
    assert pauses == [5.0, 5.0]
    assert [(m, p) for m, p, _ in Scripted.seen] == [("POST", "/hive_lab/api/jobs")] * 3
    assert {b for _, _, b in Scripted.seen} == {b'{"command": "true"}'}  # the same request each time


def test_the_cli_says_why_it_waits(server, capsys):
    from hive_lab.cli._common import _say_busy

    Scripted.answers = [BUSY, (200, {}, {"nodes": []})]
    told: list = []
    c, pauses = client(server, on_busy=lambda pause, sentence: (told.append((pause, sentence)), _say_busy(pause, sentence)))
    assert c.cluster() == {"nodes": []}
    assert told == [(5.0, "hive-lab holds 10000 unfinished jobs; retry in 5 s")]
    assert capsys.readouterr().err == ("hive-lab: the server is busy (hive-lab holds 10000 unfinished jobs; retry in "
                                       "5 s); trying again in 5 s\n")


def test_it_gives_up_once_the_pauses_would_pass_its_budget(server):
    Scripted.answers = [BUSY]
    c, pauses = client(server, busy_retry_s=12)
    with pytest.raises(ServerError) as err:
        c.cluster()
    assert err.value.status == 503 and "unfinished jobs" in str(err.value)
    assert pauses == [5.0, 5.0] and len(Scripted.seen) == 3


@pytest.mark.parametrize("answer", [
    (503, {}, {"error": "no Retry-After: not known to be safe to send again"}),
    (500, {"Retry-After": "1"}, {"error": "only a 503 is sent again"}),
    (429, {"Retry-After": "1"}, {"error": "too many queued: a limit, not load"}),
])
def test_other_errors_are_raised_at_once(server, answer):
    Scripted.answers = [answer]
    c, pauses = client(server)
    with pytest.raises(Exception):
        c.cluster()
    assert pauses == [] and len(Scripted.seen) == 1


def test_busy_retry_0_never_sends_again(server):
    Scripted.answers = [BUSY, (200, {}, {"nodes": []})]
    c, pauses = client(server, busy_retry_s=0)
    with pytest.raises(ServerError):
        c.cluster()
    assert pauses == []
