"""Server discovery order: arguments, HIVE_LAB_*, JupyterHub env, runtime files."""

import json
import os
import subprocess
import sys

import pytest

from hive_lab.discovery import find_server, from_jupyterhub, normalise_base_url
from hive_lab.errors import ServerNotFound

ENV_KEYS = ("HIVE_LAB_URL", "HIVE_LAB_TOKEN", "JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_SERVICE_PREFIX",
            "JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_HOST", "JPY_API_TOKEN")


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def test_normalise():
    assert normalise_base_url("http://h:1/user/ann/hive_lab/api/jobs") == "http://h:1/user/ann/"
    assert normalise_base_url("h:8888") == "http://h:8888/"
    assert normalise_base_url("https://x/base") == "https://x/base/"


def test_order(clean_env, monkeypatch):
    empty = str(clean_env)
    with pytest.raises(ServerNotFound, match="Set HIVE_LAB_URL"):
        find_server(runtime_dir=empty)
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ann/")
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://hub:8081/hub/api")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hubtok")
    s = find_server(runtime_dir=empty)
    assert (s.base_url, s.token) == ("http://hub:8081/user/ann/", "hubtok")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:9999/user/ann/")
    assert find_server(runtime_dir=empty).base_url == "http://127.0.0.1:9999/user/ann/"
    monkeypatch.setenv("HIVE_LAB_URL", "http://10.0.0.1:8888/")
    monkeypatch.setenv("HIVE_LAB_TOKEN", "t1")
    s = find_server(runtime_dir=empty)
    assert (s.base_url, s.token, s.source) == ("http://10.0.0.1:8888/", "t1", "HIVE_LAB_URL")
    s = find_server("http://other:1/", "t2", runtime_dir=empty)
    assert (s.base_url, s.token, s.source) == ("http://other:1/", "t2", "arguments")
    assert s.api_url == "http://other:1/hive_lab/api/"


def test_runtime_file_of_the_parent_server_wins(clean_env):
    runtime = clean_env
    # a live process that is not our ancestor, written later (most recent) ...
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (runtime / "jpserver-1.json").write_text(json.dumps(
            {"pid": os.getppid(), "url": "http://0.0.0.0:8001/", "token": "parent", "port": 8001}))
        (runtime / "jpserver-2.json").write_text(json.dumps(
            {"pid": other.pid, "url": "http://127.0.0.1:8002/", "token": "other", "port": 8002}))
        (runtime / "jpserver-3.json").write_text(json.dumps(
            {"pid": 999999999, "url": "http://127.0.0.1:8003/", "token": "dead"}))
        s = find_server(runtime_dir=str(runtime))
        assert (s.base_url, s.token) == ("http://127.0.0.1:8001/", "parent")   # 0.0.0.0 -> loopback
        assert "started this kernel" in s.source
        (runtime / "jpserver-1.json").unlink()
        s = find_server(runtime_dir=str(runtime))
        assert (s.base_url, s.token) == ("http://127.0.0.1:8002/", "other")
        assert s.source.startswith("the only running Jupyter server")
    finally:
        other.kill()
        other.wait()


def test_jupyterhub_without_prefix_is_not_used(clean_env):
    assert from_jupyterhub({"JUPYTERHUB_API_TOKEN": "x"}) is None
