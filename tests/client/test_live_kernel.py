"""%%submit inside a REAL Jupyter kernel started by the live server: the client finds its server from
the runtime file (the kernel's parent process), and the cell shows a live ipywidgets status line."""

import json
import re
import time

import pytest
from jupyter_client.blocking import BlockingKernelClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def run(kc, code, timeout=60):
    """Execute ``code``; return (iopub messages, execute_reply content)."""
    msg_id = kc.execute(code)
    messages = []
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=10)
    return messages, reply["content"]


def text_of(messages, kind):
    return "".join(m["content"].get("text", "") for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == kind)


def wait_for_kernel_info(kc, timeout=60.0):
    import queue

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg_id = kc.kernel_info()
        try:
            while kc.get_shell_msg(timeout=2)["parent_header"].get("msg_id") != msg_id:
                pass
            # iopub is subscribed too once the kernel's busy/idle for this request comes through
            while kc.get_iopub_msg(timeout=2)["parent_header"].get("msg_id") != msg_id:
                pass
            return
        except queue.Empty:
            continue
    raise AssertionError(f"the kernel did not answer kernel_info within {timeout} s")


@pytest.fixture
def kernel(hive_server):
    r = hive_server.request("POST", "/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    kc = BlockingKernelClient()
    kc.load_connection_file(str(hive_server.runtime_dir / f"kernel-{kernel_id}.json"))
    kc.start_channels(hb=False)  # a loaded 2-core machine misses heartbeats; ask for kernel_info instead
    try:
        wait_for_kernel_info(kc)
        yield kc
    finally:
        kc.stop_channels()
        hive_server.request("DELETE", f"/api/kernels/{kernel_id}")


def test_submit_in_a_kernel_finds_the_server_and_shows_a_widget(kernel):
    messages, reply = run(kernel, "%load_ext hive_lab\nimport hive_lab\nprint(hive_lab.Client().server.source)")
    assert reply["status"] == "ok", reply
    assert "the Jupyter server that started this kernel" in text_of(messages, "stdout")

    messages, reply = run(kernel, "%%submit --wait --name in-kernel\nprint('hello from the job')\n")
    assert reply["status"] == "ok", reply
    # a live display (no widget: nothing that needs the kernel after reopening) is shown and updated in
    # place while waiting, then emptied; the job's log is ordinary stdout and the result its final state
    displays = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
    assert not any(WIDGET_VIEW in m["content"].get("data", {}) for m in messages if "data" in m["content"])
    live_id = displays[0]["content"]["transient"]["display_id"]
    assert displays[-1]["msg_type"] == "display_data" and "in-kernel: succeeded (exit code 0)" in \
        displays[-1]["content"]["data"]["text/plain"]
    updates = [m for m in displays if m["content"].get("transient", {}).get("display_id") == live_id]
    assert updates[-1]["msg_type"] == "update_display_data" and updates[-1]["content"]["data"] == {}
    assert "hello from the job" in text_of(messages, "stdout")
    assert not [m for m in messages if m["msg_type"] == "execute_result"]

    # the returned Job handle works in the kernel
    messages, reply = run(kernel, "print(_.status, repr(_.logs()))")
    assert text_of(messages, "stdout").strip() == "succeeded 'hello from the job\\n'"


def test_hive_status_displays_the_dashboard(kernel):
    messages, reply = run(kernel, "%load_ext hive_lab\n%hive_status")
    assert reply["status"] == "ok", reply
    assert any(WIDGET_VIEW in m["content"].get("data", {}) for m in messages if m["msg_type"] == "display_data")
    opened = [m["content"]["data"]["state"].get("_model_name") for m in messages if m["msg_type"] == "comm_open"]
    assert "BokehModel" in opened and "GridBoxModel" in opened


def test_submit_without_wait_returns_at_once_and_keeps_watching(kernel):
    messages, reply = run(kernel, "%load_ext hive_lab")
    messages, reply = run(kernel, "%%submit --name bg\nimport time; time.sleep(1); print('bg done')\n")
    assert reply["status"] == "ok", reply
    assert not [m for m in messages if m["msg_type"] == "execute_result"]  # no Out[] frozen at "scheduled"
    shown = next(m for m in messages if m["msg_type"] == "display_data")
    display_id = shown["content"]["transient"]["display_id"]
    assert re.search(r"bg: (submitted|queued|scheduled|running)", shown["content"]["data"]["text/plain"])
    code = ("m = get_ipython().magics_manager.registry['HiveLabMagics']\n"
            "job = _\n"
            "m.watchers[job.id].join(60)\n"
            "print(job.state, m.watchers[job.id].is_alive(), repr(job.logs()))")
    messages, reply = run(kernel, code, timeout=90)
    assert text_of(messages, "stdout").strip() == "succeeded False 'bg done\\n'"
    # the same display was updated in place to the final state (with the log tail)
    updates = [m for m in messages if m["msg_type"] == "update_display_data"
               and m["content"]["transient"]["display_id"] == display_id]
    assert "bg: succeeded (exit code 0)" in updates[-1]["content"]["data"]["text/plain"]
    assert "bg done" in updates[-1]["content"]["data"]["text/plain"]


def test_submit_from_a_gpu_kernel_started_by_the_hive_provisioner(live_server_factory, tmp_path):
    """The whole path: a notebook's GPU kernel is itself a scheduled job (hive provisioner), which
    injects HIVE_LAB_URL/HIVE_LAB_TOKEN; %%submit inside it finds the server through them."""
    import argparse

    from hive_lab.cli.kernelspec import kernel_json

    specs = tmp_path / "specs" / "kernels" / "hive-gpu"
    specs.mkdir(parents=True)
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (specs / "kernel.json").write_text(json.dumps(kernel_json(args)))
    srv = live_server_factory(env={"JUPYTER_PATH": str(tmp_path / "specs")})
    r = srv.request("POST", "/api/sessions", json={"path": "nb.ipynb", "name": "nb.ipynb", "type": "notebook",
                                                    "kernel": {"name": "hive-gpu"}})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    kc = BlockingKernelClient()
    kc.load_connection_file(str(srv.runtime_dir / f"kernel-{kernel_id}.json"))
    kc.start_channels(hb=False)
    try:
        wait_for_kernel_info(kc)
        messages, reply = run(kc, "%load_ext hive_lab\nimport hive_lab\nprint(hive_lab.Client().server.source)")
        assert reply["status"] == "ok", reply
        assert text_of(messages, "stdout").strip().splitlines()[-1] == "HIVE_LAB_URL"  # after the kernel's banner
        messages, reply = run(kc, "%%submit --wait --gpus 1 --name from-gpu-kernel\nimport os\n"
                                  "print('job GPUs', os.environ['CUDA_VISIBLE_DEVICES'])\n")
        assert reply["status"] == "ok", reply
        result = [m for m in messages if m["msg_type"] == "display_data"][-1]
        assert "from-gpu-kernel: succeeded (exit code 0)" in result["content"]["data"]["text/plain"]
        jobs = srv.request("GET", "jobs?limit=10").json()["jobs"]
        kinds = {j["name"]: j["kind"] for j in jobs}
        assert kinds["from-gpu-kernel"] == "batch" and "kernel" in kinds.values()
    finally:
        kc.stop_channels()
        srv.request("DELETE", f"/api/sessions/{r.json()['id']}")


def test_the_dashboard_pauses_while_no_browser_is_attached(hive_server, kernel):
    """A %hive_status left open with nobody looking stops sending updates (the Jupyter server would
    keep every one for the browser's return); a browser connecting makes it catch up."""
    import asyncio
    import threading

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    wait_paused = ("import time\nfrom hive_lab.widgets.dashboard import Dashboard\n"
                   "d = Dashboard(attach_interval=0.2)\n"
                   "deadline = time.monotonic() + 30\n"
                   "while not d.paused and time.monotonic() < deadline: time.sleep(0.05)\n"
                   "print('paused', d.paused, d.queue._unsubscribe is None, d.heatmap._unsubscribe is None)")
    messages, reply = run(kernel, wait_paused)  # this test's client talks ZMQ: no browser counts
    assert reply["status"] == "ok", reply
    assert text_of(messages, "stdout").strip() == "paused True True True"

    kernel_id = next(p.stem[len("kernel-"):] for p in hive_server.runtime_dir.glob("kernel-*.json")
                     if json.loads(p.read_text())["shell_port"] == kernel.shell_port)
    url = f"ws://127.0.0.1:{hive_server.port}/api/kernels/{kernel_id}/channels?session_id=browser"
    opened, done = threading.Event(), threading.Event()

    def browser():
        async def attach():
            ws = await websocket_connect(HTTPRequest(url, headers=hive_server.headers()))
            opened.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
            ws.close()
        asyncio.run(attach())

    thread = threading.Thread(target=browser, daemon=True)
    thread.start()
    try:
        assert opened.wait(30)
        messages, reply = run(kernel, "deadline = time.monotonic() + 30\n"
                                      "while d.paused and time.monotonic() < deadline: time.sleep(0.05)\n"
                                      "print('resumed', not d.paused, d.queue._unsubscribe is not None)\nd.stop()")
        assert text_of(messages, "stdout").strip() == "resumed True True"
    finally:
        done.set()
        thread.join(10)
