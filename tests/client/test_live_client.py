"""hive_lab.Client against a REAL Jupyter server with the extension."""

import socket
import time

import pytest

from hive_lab import Client
from hive_lab.errors import BadRequest, Conflict, Forbidden, NotFound, ServerUnreachable

WRITE_OUTPUT = (
    "import os, pathlib\n"
    "print('data:', open('data.txt').read().strip())\n"
    "out = pathlib.Path(os.environ['HIVE_OUTPUT_DIR'])\n"
    "(out / 'sub').mkdir(parents=True, exist_ok=True)\n"
    "(out / 'sub' / 'result.txt').write_text('42')\n"
)


def test_me_vcs_cluster(ann):
    me = ann.me()
    assert (me["user"], me["admin"], me["vcs"]) == ("ann", False, ["default"])
    vcs = {vc["name"]: vc for vc in ann.vcs()}
    assert vcs["default"]["guaranteed_gpus"] == 2 and vcs["default"]["mine"]
    assert not vcs["other"]["mine"]
    cluster = ann.cluster()
    assert cluster["gpus_total"] == 4 and len(cluster["gpus"]) == 4
    assert all(g["path"] for g in cluster["gpus"])


def test_submit_files_logs_outputs(ann, tmp_path):
    job = ann.handle(ann.submit({
        "name": "files", "vc": "default", "command": "python3 -u main.py",
        "tasks": [{"name": "main", "count": 1, "gpus": 1}],
        "files": {"main.py": WRITE_OUTPUT, "data.txt": "hello\n"}}))
    job.wait(timeout=30)
    assert job.state == "succeeded" and job.exit_code == 0
    assert "data: hello" in job.logs()
    assert job.outputs() == [{"path": "sub/result.txt", "size": 2}]
    assert job.read_output("sub/result.txt") == b"42"
    [local] = job.download(tmp_path)
    assert local.read_text() == "42" and local == tmp_path / "sub" / "result.txt"
    with pytest.raises(Conflict) as err:
        job.cancel()
    assert err.value.status == 409 and str(err.value)


def test_follow_logs_streams_until_the_end(ann):
    job = ann.handle(ann.submit({"vc": "default", "command": "for i in 1 2 3; do echo line$i; sleep 0.2; done",
                                 "tasks": [{"name": "main", "count": 1, "gpus": 0}]}))
    deadline = time.monotonic() + 20
    while job.status in ("submitted", "queued", "scheduled") and time.monotonic() < deadline:
        time.sleep(0.05)
    text = "".join(ann.logs(job.id, follow=True))
    assert text.split() == ["line1", "line2", "line3"]


def test_errors_carry_the_servers_message(ann):
    with pytest.raises(Forbidden) as err:
        ann.submit({"vc": "other", "command": "true", "tasks": [{"name": "main", "count": 1, "gpus": 1}]})
    assert "other" in str(err.value)
    with pytest.raises(BadRequest) as err:
        ann.submit({"vc": "default", "command": "true", "tasks": [{"name": "main", "count": 1, "gpus": -1}]})
    assert err.value.field and "gpus" in err.value.field
    with pytest.raises(NotFound):
        ann.job("j-999999")


def test_unreachable_server_says_what_to_set():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = Client(f"http://127.0.0.1:{port}/", "x")
    with pytest.raises(ServerUnreachable) as err:
        client.me()
    assert f"127.0.0.1:{port}" in str(err.value) and "--url" in str(err.value)


def test_bad_token_is_explained(hive_server):
    with pytest.raises(Exception) as err:
        Client(hive_server.url, "wrong").me()
    assert "token" in str(err.value).lower()


def test_event_stream_says_hello_and_reports_jobs(ann):
    import queue

    got: "queue.Queue[dict]" = queue.Queue()
    stream = ann.subscribe(got.put)
    try:
        first = got.get(timeout=10)
        assert first == {"type": "hello", "user": "ann", "seq": first["seq"]} and isinstance(first["seq"], int)
        job = ann.submit({"vc": "default", "command": "true", "tasks": [{"name": "main", "count": 1, "gpus": 0}]})
        states = set()
        while "succeeded" not in states:
            msg = got.get(timeout=20)
            if msg.get("type") == "job" and msg["job"]["id"] == job["id"]:
                states.add(msg["job"]["state"])
        assert "running" in states or "succeeded" in states
    finally:
        stream.close()


def test_jupyterhub_environment_and_a_base_url(live_server_factory, monkeypatch):
    """A single-user server under /user/ann/ found from the JupyterHub variables; REST and events work."""
    import queue

    srv = live_server_factory(base_url="/user/ann/", users={"ann": {}}, vc_access={"ann": ["default"]})
    for key in ("HIVE_LAB_URL", "HIVE_LAB_TOKEN", "JUPYTERHUB_SERVICE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ann/")
    monkeypatch.setenv("JUPYTERHUB_API_URL", f"http://127.0.0.1:{srv.port}/hub/api")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", srv.tokens["ann"])
    client = Client()
    assert client.base_url == srv.url and client.server.source.startswith("JupyterHub")
    assert client.me()["user"] == "ann"
    got: "queue.Queue[dict]" = queue.Queue()
    stream = client.subscribe(got.put)
    try:
        assert got.get(timeout=10)["type"] == "hello"
    finally:
        stream.close()
