import json
import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture
def recorded():
    """Recorded JSON shaped per docs/rest-api.md (cluster, vcs, jobs)."""
    return {name: json.loads((DATA / f"{name}.json").read_text()) for name in ("cluster", "vcs", "jobs")}


# --- a REAL jupyter server with hive-lab, shared by this directory's live tests -----------------------


def end_active_jobs(client) -> None:
    """Cancels every job of the client's user that has not finished and waits until they have: the next
    test on this worker's shared server starts with the user's GPUs free. (Cancelling without waiting
    left a job stopping into the next test, whose job then overflowed into another VC's GPUs: which test
    came next decided it, and under pytest-xdist the order differs from a serial run's.)"""
    from hive_lab_server.wire.states import ACTIVE_STATES

    from waiting import wait_until

    active = ",".join(str(getattr(s, "value", s)) for s in ACTIVE_STATES)
    for job in client.jobs(user="me", state=active):
        try:
            client.cancel(job["id"])
        except Exception:  # noqa: BLE001 - it may have just finished
            pass
    wait_until(lambda: not client.jobs(user="me", state=active), "the user's cancelled jobs to end")


LIVE_CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "A100", "levels": ["pair"],
                "vcs": {"default": 2, "other": 2}}


@pytest.fixture(scope="session")
def hive_server(tmp_path_factory):
    """One live server for the client tests: 4 A100 in VCs ``default`` (2) and ``other`` (2);
    ann may use ``default`` only, bob both."""
    from fixtures.live_server import LiveServer

    srv = LiveServer(tmp_path_factory.mktemp("hive-client-srv"), cluster_config=LIVE_CLUSTER,
                     users={"ann": {}, "bob": {}}, vc_access={"ann": ["default"], "bob": ["default", "other"]})
    srv.start()
    yield srv
    srv.close()


@pytest.fixture
def ann_env(hive_server, monkeypatch):
    """The environment hive-lab's provisioner gives ann's kernels."""
    for key in ("JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HIVE_LAB_URL", hive_server.url)
    monkeypatch.setenv("HIVE_LAB_TOKEN", hive_server.tokens["ann"])
    return hive_server


@pytest.fixture
def ann(ann_env):
    from hive_lab import Client

    client = Client()
    yield client
    end_active_jobs(client)


@pytest.fixture
def shell(ann_env, tmp_path, monkeypatch):
    """A real IPython shell (started once per session) with hive_lab loaded, talking to the live server
    as ann, in a fresh working dir; ann's jobs still active afterwards are cancelled."""
    from IPython.core.getipython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from hive_lab import Client

    monkeypatch.chdir(tmp_path)
    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "hive_lab")
    ip.magics_manager.registry["HiveLabMagics"].client = None  # a fresh client per test (the env differs)
    yield ip
    end_active_jobs(Client(ann_env.url, ann_env.tokens["ann"]))
