"""The events websocket's limits against a real server: ``since`` replays or says ``snapshot``, a bad
``since`` is a JSON 400, and a real client that never reads is closed with code 4008 once more than
``events_buffer_bytes`` wait for it (the server keeps serving everyone else)."""

import json
import socket
import struct
import threading

import pytest
import requests
import websocket

from fixtures.live_server import LiveServer
from waiting import wait_until

REPLAY_MAX = 5
BUFFER_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("events"), config={
        "HiveLabApp": {"events_replay_max": REPLAY_MAX, "events_buffer_bytes": BUFFER_BYTES}}).start()
    yield server
    server.close()


def connect(srv, query="", **kwargs):
    return websocket.create_connection(srv.ws_url("events") + query, header=[f"Authorization: token {srv.token}"],
                                       timeout=30, **kwargs)


def run_job(srv):
    r = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
    assert r.status_code == 201, r.text
    return srv.wait_for_job(r.json()["id"], "succeeded")


def test_since_replays_the_stored_state_changes_or_says_snapshot(srv):
    run_job(srv)  # more state changes than REPLAY_MAX in all
    job = run_job(srv)
    history = job["history"]
    assert len(history) >= 3
    ws = connect(srv)
    head = json.loads(ws.recv())["seq"]
    ws.close()
    assert head >= history[-1]["seq"]

    since = history[-3]["seq"]  # replay: the two state changes after it, as the job's history has them
    ws = connect(srv, f"?since={since}")
    try:
        assert json.loads(ws.recv()) == {"type": "hello", "user": srv.request("GET", "me").json()["user"],
                                         "seq": head}
        replayed = [json.loads(ws.recv()) for _ in range(2)]
        assert [(m["type"], m["seq"], m["job"], m["state"], m["reason"]) for m in replayed] == [
            ("state", h["seq"], job["id"], h["state"], h["reason"]) for h in history[-2:]]
    finally:
        ws.close()

    for query, why in ((f"?since={head + 1000}", "newer than"), ("?since=0", f"more than {REPLAY_MAX}")):
        ws = connect(srv, query)
        try:
            assert json.loads(ws.recv())["type"] == "hello"
            marker = json.loads(ws.recv())
            assert marker["type"] == "snapshot" and marker["seq"] == head and why in marker["reason"], marker
        finally:
            ws.close()


@pytest.mark.parametrize("query", ["?since=AAA", "?since=-1", "?since=1&since=2", "?since=1.5"])
def test_a_bad_since_is_a_json_400(srv, query):
    r = requests.get(srv.api_url + "events" + query, headers={**srv.headers(), "Connection": "Upgrade",
                                                               "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                                               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert r.status_code == 400 and r.headers["Content-Type"].startswith("application/json"), r.text
    assert r.json()["field"] == "since" and "since" in r.json()["error"]


def dropped(srv):
    for line in srv.request("GET", "metrics").text.splitlines():
        if line.startswith("hive_lab_event_subscribers_dropped_total "):
            return float(line.split()[1])
    return 0.0


@pytest.mark.timeout(300)
def test_a_subscriber_that_never_reads_is_closed_with_4008(srv):
    before = dropped(srv)
    # a small receive buffer: the kernel holds little for it, so the server's outbox fills soon
    silent = connect(srv, sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),))
    reader = connect(srv)  # a subscriber that reads (in a thread) keeps its stream
    read = []

    def read_all():
        try:
            while True:
                read.append(json.loads(reader.recv()))
        except (websocket.WebSocketException, OSError, ValueError) as exc:
            read.append(repr(exc))

    thread = threading.Thread(target=read_all, daemon=True)
    thread.start()
    try:
        submitted = 0
        while dropped(srv) == before:
            assert submitted < 3000, "the server kept buffering for a subscriber that never reads"
            for _ in range(10):
                r = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
                assert r.status_code == 201, r.text
            submitted += 10
        close_frame = None
        while close_frame is None:  # what was sent before the close, then the close frame
            opcode, frame = silent.recv_data_frame(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                close_frame = frame.data
        code = struct.unpack("!H", close_frame[:2])[0]
        reason = close_frame[2:].decode()
        assert code == 4008 and reason.startswith("slow consumer") and "since=" in reason, (code, reason)
        # what the server holds for it is bounded in the kernel too (SEND_BUFFER_BYTES): about 60 jobs' events
        # fill it and the outbox; with the kernel's send buffer left to autotune (up to 4 MiB) it took 1,000
        assert submitted <= 300, f"{submitted} jobs' events went to a subscriber that never reads before it was closed"
        assert dropped(srv) == before + 1, read[-1:]  # only the silent one
        last = run_job(srv)
        wait_until(lambda: any(m.get("job") == last["id"] and m.get("state") == "succeeded" for m in read),
                   "the reading subscriber to get the events of a job submitted after the drop")
    finally:
        silent.close()
        reader.close()
        thread.join(10)


UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


@pytest.mark.parametrize("method, token, upgrade, status", [
    ("TRACE", True, False, 405), ("TRACE", False, False, 405), ("GET", False, True, 401), ("GET", False, False, 401),
    ("POST", True, False, 405), ("GET", True, False, 400),
])
def test_events_refusals_are_json_and_logged_without_a_traceback(srv, method, token, upgrade, status):
    """TRACE, a missing token, a plain GET without the websocket upgrade: a JSON error, never an HTML page,
    and no uncaught exception in the server's error page code."""
    before = srv.log().count("Traceback")
    headers = {**(srv.headers() if token else {}), **(UPGRADE if upgrade else {})}
    r = requests.request(method, srv.api_url + "events", headers=headers, timeout=30)
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/json"), r.text
    assert r.json()["error"] and "<html" not in r.text.lower()
    r = requests.request(method, srv.api_url + "jobs", headers=headers, timeout=30)  # the REST handlers too
    assert r.status_code in (200, 400, 401, 405) and r.headers["Content-Type"].startswith("application/json"), r.text
    assert srv.log().count("Traceback") == before, srv.log()[-3000:]
