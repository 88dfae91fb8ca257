"""hive_lab.Client is the one way Python talks to the REST API: no other module of ``hive_lab`` opens HTTP
connections of its own, and the code that used to (``hive-lab demo``, the widgets' attachment watch) works
through the client against a real server."""

import ast
import pathlib

import hive_lab
from hive_lab.cli.demo import SAMPLE_JOBS, cancel_active_jobs, submit_samples
from hive_lab.client import Client
from hive_lab.discovery import ServerInfo
from hive_lab.widgets.attached import kernel_connections

HTTP_LIBRARIES = {"requests", "urllib.request", "http.client", "httpx", "urllib3", "tornado.httpclient", "aiohttp"}
PACKAGE = pathlib.Path(hive_lab.__file__).parent


def http_imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found |= {n for n in names if n in HTTP_LIBRARIES or n.split(".")[0] in ("requests", "httpx", "urllib3")}
    return found


def test_only_the_client_talks_http():
    talking = {str(p.relative_to(PACKAGE)): http_imports(p) for p in sorted(PACKAGE.rglob("*.py")) if http_imports(p)}
    assert talking == {"client.py": {"requests"}}


def test_the_demo_submits_and_cancels_through_the_client(live_server):
    client = Client(server=ServerInfo(live_server.url, live_server.token, "test"), busy_retry_s=0)
    jobs = submit_samples(client)
    assert [j["name"] for j in jobs] == [body["name"] for body in SAMPLE_JOBS]
    assert all(j["spec"].get("environment") is None for j in jobs)  # the samples as they are
    cancelled = cancel_active_jobs(client)
    assert sorted(cancelled) == sorted(j["id"] for j in jobs)
    for job in jobs:
        assert live_server.wait_for_job(job["id"], "cancelled")["reason"].endswith("(hive-lab demo stopped)")
    assert cancel_active_jobs(client) == []


def test_the_demo_client_sends_its_token_and_says_when_it_is_wrong(live_server):
    from hive_lab.errors import Unauthorized

    wrong = Client(server=ServerInfo(live_server.url, "not-the-token", "test"), busy_retry_s=0)
    try:
        submit_samples(wrong)
    except Unauthorized as exc:
        assert "refused the token (wrong or expired)" in str(exc)
    else:
        raise AssertionError("a wrong token was let in")
    assert cancel_active_jobs(wrong) == []  # nothing to cancel that it may see; no traceback at the demo's end


def test_the_attachment_watch_counts_a_real_kernels_connections(live_server):
    r = live_server.request("POST", "/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    try:
        assert kernel_connections(kernel_id, runtime_dir=str(live_server.runtime_dir)) == 0
        assert kernel_connections("no-such-kernel", runtime_dir=str(live_server.runtime_dir)) is None
    finally:
        live_server.request("DELETE", f"/api/kernels/{kernel_id}")
