"""A GPU kernel the service refuses reaches the person starting it as the service's 4xx and sentence,
through the routes JupyterLab uses (``POST /api/sessions``: a notebook opened with a kernel; ``PATCH
/api/sessions/{id}``: another kernel picked) and ``POST /api/kernels``: never jupyter_server's 500.

A real Jupyter server with hive-lab; its kernel provisioner asks the service as ``ann`` (the
provisioner's ``HIVE_LAB_TOKEN``, as a Hub user's server does with her Hub token), who may use VC cv-101
only, with at most 1 GPU there.
"""

from __future__ import annotations

import argparse
import json

import pytest

from fixtures.live_server import LiveServer
from hive_lab.cli.kernelspec import kernel_json

CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "levels": ["pair"], "vcs": {"cv-101": 2, "research": 2}}
LIMITS = {"cv-101": {"default": {"max_gpus": 1}}}
PREFIX = "hive-lab refused the kernel's GPU request: "

# kernelspec -> (what it asks for, the status and the sentence the service answers)
REFUSED = {
    "cv-101-two": ({"gpus": 2, "vc": "cv-101"}, 403,
                   "the job asks for 2 GPUs but you may hold at most 1 GPU in VC cv-101; ask for fewer GPUs"),
    "research-gpu": ({"gpus": 1, "vc": "research"}, 403, "user ann may not submit to VC research; your VCs: cv-101"),
    "cv-101-a100": ({"gpus": 1, "vc": "cv-101", "gpu_type": "A100"}, 400,
                    "tasks[0].gpu_type: no GPU type 'A100' in this cluster (types: T4)"),
}


def install_kernelspec(root, name: str, gpus=1, vc=None, gpu_type=None) -> None:
    args = argparse.Namespace(gpus=gpus, gpu_type=gpu_type, vc=vc, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (root / "kernels" / name).mkdir(parents=True)
    (root / "kernels" / name / "kernel.json").write_text(json.dumps(kernel_json(args)))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refusals")
    for name, (ask, _, _) in REFUSED.items():
        install_kernelspec(tmp / "specs", name, **ask)
    srv = LiveServer(tmp / "srv", launcher="local", cluster_config=CLUSTER, users={"ann": {}},
                     vc_access={"ann": ["cv-101"]}, config={"HiveLabApp": {"user_limits": LIMITS}})
    srv.env.update({"JUPYTER_PATH": str(tmp / "specs"), "HIVE_LAB_URL": srv.url, "HIVE_LAB_TOKEN": srv.tokens["ann"]})
    srv.start()
    yield srv
    srv.close()


def assert_refused(r, kernel: str) -> None:
    _, status, sentence = REFUSED[kernel]
    assert r.status_code == status, r.text
    body = r.json()
    assert body["message"].startswith(PREFIX + sentence), body
    assert body["reason"] == "GPU kernel refused", body


@pytest.mark.parametrize("kernel", sorted(REFUSED))
def test_a_notebook_opened_with_a_refused_kernel_gets_the_services_status_and_sentence(server, kernel):
    body = {"path": f"{kernel}.ipynb", "name": f"{kernel}.ipynb", "type": "notebook", "kernel": {"name": kernel}}
    assert_refused(server.request("POST", "/api/sessions", json=body), kernel)
    assert server.request("GET", "jobs").json()["total"] == 0  # nothing half-applied
    assert kernel not in json.dumps(server.request("GET", "/api/kernels").json())


@pytest.mark.parametrize("kernel", sorted(REFUSED))
def test_a_refused_kernel_started_alone_gets_the_services_status_and_sentence(server, kernel):
    assert_refused(server.request("POST", "/api/kernels", json={"name": kernel}), kernel)


def test_picking_a_refused_kernel_for_an_open_notebook_keeps_its_kernel(server):
    body = {"path": "switch.ipynb", "name": "switch.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
    r = server.request("POST", "/api/sessions", json=body)
    assert r.status_code == 201, r.text
    session = r.json()
    try:
        r = server.request("PATCH", f"/api/sessions/{session['id']}", json={"kernel": {"name": "research-gpu"}})
        assert_refused(r, "research-gpu")
        after = server.request("GET", f"/api/sessions/{session['id']}").json()
        assert after["kernel"]["id"] == session["kernel"]["id"]  # the notebook keeps the kernel it had
    finally:
        server.request("DELETE", f"/api/sessions/{session['id']}")


def test_other_session_requests_are_jupyter_servers_own(server):
    """The subclassed handlers answer everything but a refusal as jupyter_server does."""
    r = server.request("POST", "/api/sessions", json={"path": "x.ipynb", "type": "notebook",
                                                      "kernel": {"name": "no-such-kernel"}})
    assert r.status_code == 501 and "no-such-kernel" in r.json()["message"], r.text
    assert server.request("POST", "/api/sessions", data="").status_code == 400
