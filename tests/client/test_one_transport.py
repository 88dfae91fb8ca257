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


# -- one codec for both I/O stacks (wire.transport) ------------------------------------------------

SERVER_PACKAGE = pathlib.Path(hive_lab.__file__).parents[1] / "server_ext" / "hive_lab_server"


def test_the_server_side_http_clients_are_known_and_one_speaks_the_api():
    """Inside the Jupyter server, the only client of hive-lab's own API is the provisioner's async one (it
    must not block the loop, so it cannot be ``hive_lab.Client``); the other HTTP users speak to other
    things. A new one fails here until someone decides which it is."""
    talking = {str(p.relative_to(SERVER_PACKAGE)) for p in sorted(SERVER_PACKAGE.rglob("*.py")) if http_imports(p)}
    assert talking == {
        "kernels/rest.py",  # hive-lab's API, async (wire.transport's codec)
        "hub/forward.py",  # a proxy: passes its caller's request through to the service
        "execution/slurm/rest.py",  # slurmrestd
        "execution/launchers/docker_watch.py",  # the Docker engine's socket
        "api/handlers/base.py",  # http.client's status phrases only
    }
    speaks_api = {str(p.relative_to(SERVER_PACKAGE)) for p in talking_paths() if "transport." in p.read_text()}
    assert speaks_api == {"kernels/rest.py"}


def talking_paths() -> list[pathlib.Path]:
    return [p for p in sorted(SERVER_PACKAGE.rglob("*.py")) if http_imports(p)]


def test_both_api_clients_take_url_headers_and_errors_from_the_one_codec():
    """Neither client spells the API's prefix, the token header or an error body's keys itself."""
    for path in (PACKAGE / "client.py", PACKAGE / "discovery.py", SERVER_PACKAGE / "kernels" / "rest.py"):
        text = path.read_text(encoding="utf-8")
        assert "from hive_lab_server.wire import transport" in text, path
        for spelled in ('"hive_lab/api/"', 'f"token {', '"Authorization"', '.get("error")'):
            assert spelled not in text, f"{path.name} spells {spelled} itself"


def test_the_codec_reads_each_servers_error_shape_and_refuses_odd_pauses():
    from hive_lab_server.wire import transport

    assert transport.error_reply(b'{"error": "gpus must be 1-8", "field": "gpus"}') == ("gpus must be 1-8", "gpus")
    assert transport.error_reply(b'{"message": "Forbidden"}') == ("Forbidden", None)  # the Hub's shape
    assert transport.error_reply(b"<html>502</html>") == (None, None)
    assert transport.error_reply(b'["a list"]') == (None, None)
    assert transport.retry_after(503, {"Retry-After": "2"}) == 2.0
    assert transport.retry_after(503, {"Retry-After": "Fri, 27 Nov 2026 10:00:00 GMT"}) is None
    assert transport.retry_after(503, {"Retry-After": "86400"}) is None
    assert transport.retry_after(429, {"Retry-After": "2"}) is None
    assert transport.request_url("http://h/x/hive_lab/api/", "jobs", {"state": "queued", "after": None}) == \
        "http://h/x/hive_lab/api/jobs?state=queued"
    assert transport.api_url("http://h:1/base") == "http://h:1/base/hive_lab/api/"


def test_the_provisioners_client_says_the_servers_sentence(live_server):
    import asyncio

    from hive_lab_server.kernels.rest import HiveApiError, HiveRest

    async def refused() -> HiveApiError:
        rest = HiveRest(live_server.url, live_server.token)
        try:
            await rest.request("POST", "jobs", body={"name": "x", "gpus": -1, "command": "true"})
        except HiveApiError as exc:
            return exc
        finally:
            rest.close()
        raise AssertionError("a job asking for -1 GPUs was taken")

    exc = asyncio.run(refused())
    assert exc.status == 400 and "gpus" in str(exc) and "HTTP 400" not in str(exc)
