"""Reads are served while writes are shed (issue 40): writes have their own budget
(``api/load_shedding.WriteBudget``), so with ``max_requests_in_flight`` writes being served a new write is
answered 503 + Retry-After at once while ``GET jobs``, ``GET cluster``, ``GET vcs`` and ``GET jobs/{id}`` are
still answered; once the held writes are answered, writes are taken again. Through a real server process."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import socket

import pytest

from fixtures.held_writes import HELD_WRITES_CONFIG, end_tasks, hold_two_writes
from fixtures.live_server import LiveServer


@pytest.fixture
def srv(tmp_path):
    server = LiveServer(tmp_path, config=HELD_WRITES_CONFIG).start()
    yield server
    server.close()


def test_reads_are_answered_while_writes_are_shed(srv):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ids, held = hold_two_writes(srv, pool)
        shed = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
        reads = {path: srv.request("GET", path) for path in ("jobs", "cluster", "vcs", f"jobs/{ids[0]}", "me")}
        end_tasks(srv)  # the tasks end: the pauses are answered
        answered = [f.result() for f in held]
    assert shed.status_code == 503, shed.text
    assert shed.headers["Retry-After"] == "1"
    assert "max_requests_in_flight" in shed.json()["error"] and "writes" in shed.json()["error"]
    assert {path: r.status_code for path, r in reads.items()} == dict.fromkeys(reads, 200)
    assert [r.status_code for r in answered] == [200, 200], [r.text for r in answered]
    after = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
    assert after.status_code == 201, after.text


def read_answer(sock: socket.socket) -> tuple[bytes, dict[str, str], bytes]:
    """One HTTP answer read off a raw socket: (status line, headers, body); the body by its Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        assert more, f"the connection closed before an answer's headers: {data!r}"
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    while len(body) < int(headers["content-length"]):
        more = sock.recv(65536)
        assert more, "the connection closed inside the answer's body"
        body += more
    return status.encode(), headers, body


def test_a_write_is_shed_at_the_connection_from_its_headers_alone(srv):
    """With the write budget spent, a write is answered 503 + Retry-After before its body is read or its caller
    authenticated (api/connection_shedding.py): a request that sends only its headers, announcing 10 MB, gets
    the answer and the connection is closed unread; a small write on a keep-alive connection is answered the
    same and the connection serves a read next; reads are answered meanwhile, writes are taken again after."""
    shed_before = shed_total(srv)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ids, held = hold_two_writes(srv, pool)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as sock:  # (a bound on a failure)
            sock.sendall(f"POST {srv.base_url}hive_lab/api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n".encode())
            status, headers, body = read_answer(sock)  # (no body was sent, and none will be)
            closed = sock.recv(1) == b""
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        conn.request("POST", f"{srv.base_url}hive_lab/api/jobs", body=json.dumps({"command": "true"}),
                     headers={**srv.headers(), "Content-Type": "application/json"})
        small = conn.getresponse()
        small_body, small_headers = small.read(), dict(small.getheaders())
        conn.request("GET", f"{srv.base_url}hive_lab/api/jobs/{ids[0]}", headers=srv.headers())
        read_after = conn.getresponse()
        read_after_status = read_after.status
        read_after.read()
        conn.close()
        reads = {path: srv.request("GET", path).status_code for path in ("jobs", "cluster", "vcs", "me")}
        end_tasks(srv)
        answered = [f.result() for f in held]
    assert status.startswith(b"HTTP/1.1 503"), (status, body)
    assert headers["retry-after"] == "1" and headers["connection"] == "close", headers
    assert "max_requests_in_flight" in json.loads(body)["error"]
    assert closed, "the connection of a shed write with a large body is closed, its body unread"
    assert small.status == 503 and small_headers["Retry-After"] == "1", (small.status, small_body)
    assert "writes" in json.loads(small_body)["error"]
    assert read_after_status == 200, "the keep-alive connection of a shed small write serves the next request"
    assert reads == dict.fromkeys(reads, 200)
    assert [r.status_code for r in answered] == [200, 200], [r.text for r in answered]
    assert shed_total(srv) - shed_before == 2
    assert srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]}).status_code == 201


def shed_total(srv: LiveServer) -> float:
    text = srv.request("GET", "metrics").text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("hive_lab_requests_shed_total"))


def test_a_submit_to_a_full_service_is_refused_at_the_connection_before_its_body_is_read(tmp_path):
    """With ``max_unfinished_jobs`` jobs unfinished, a submit is answered 503 + Retry-After from its headers
    (api/connection_shedding.py), as admission would answer it, without its body being parsed: a body that
    is not JSON gets the 503, not the 400 its handler would give. A dry run is still answered, reads too,
    and once a job has ended a submit is taken again."""
    srv = LiveServer(tmp_path, config={"HiveLabApp": {"max_unfinished_jobs": 2}}).start()
    try:
        ids = []
        for _ in range(2):
            r = srv.request("POST", "jobs", json={"command": "sleep 600", "tasks": [{"gpus": 0}]})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        refused_before = submits_refused(srv)
        garbled = srv.request("POST", "jobs", data=b"{not json", headers={"Content-Type": "application/json"})
        assert garbled.status_code == 503, garbled.text
        assert "max_unfinished_jobs" in garbled.json()["error"] and garbled.json()["field"] is None
        assert garbled.headers["Retry-After"] == "5"
        valid = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
        assert valid.status_code == 503 and "max_unfinished_jobs" in valid.json()["error"], valid.text
        assert submits_refused(srv) - refused_before == 2
        dry = srv.request("POST", "jobs?dry_run=1", json={"command": "true", "tasks": [{"gpus": 0}]})
        assert dry.status_code == 200, dry.text
        assert srv.request("GET", "jobs").status_code == 200
        assert srv.request("DELETE", f"jobs/{ids[0]}").status_code == 200
        srv.wait_for_job(ids[0], "cancelled", timeout=60)  # (ended: it no longer counts against the bound)
        again = srv.request("POST", "jobs", json={"command": "sleep 600", "tasks": [{"gpus": 0}]})
        assert again.status_code == 201, again.text
        ids.append(again.json()["id"])
        for job_id in ids[1:]:
            srv.request("DELETE", f"jobs/{job_id}")
    finally:
        srv.close()


def submits_refused(srv: LiveServer) -> float:
    text = srv.request("GET", "metrics").text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("hive_lab_submits_shed_total"))
