"""Per-user limits from the Python client and `hive-lab admin limits` against a REAL server.

Uses the session's server (tests/client/conftest.py) on VC ``other`` (bob's; ann has no access) and
leaves it without limits at the end."""

import json
import pathlib
import subprocess
import sys

import pytest

from hive_lab import Client
from hive_lab.cli.admin import BadSetting, apply_settings
from hive_lab.errors import BadRequest, Forbidden

HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")


@pytest.fixture
def owner(hive_server):
    client = Client(hive_server.url, hive_server.token)  # the server's own token: its owner, an admin
    yield client
    client.set_limits("other", {})


def admin_limits(srv, *args, token=None):
    return subprocess.run([HIVE_LAB, "admin", "limits", "other", "--url", srv.url, "--token", token or srv.token,
                           *args], capture_output=True, text=True, timeout=60)


def test_client_sets_and_users_read_their_limits(hive_server, owner):
    bob = Client(hive_server.url, hive_server.tokens["bob"])
    ann = Client(hive_server.url, hive_server.tokens["ann"])
    got = owner.set_limits("other", {"default": {"max_gpus": 1}, "users": {"bob": {"max_kernels": 1}}})
    assert got["source"] == "store" and got["users"] == {"bob": {"max_kernels": 1}}
    assert bob.my_limits("other") == {"max_gpus": 1, "max_kernels": 1}
    assert bob.limits("other")["default"] == {"max_gpus": 1}
    with pytest.raises(Forbidden):
        bob.set_limits("other", {})
    with pytest.raises(Forbidden):
        ann.limits("other")  # not her VC
    with pytest.raises(BadRequest) as e:
        owner.set_limits("other", {"default": {"max_gpus": -1}})
    assert e.value.field == "default.max_gpus"
    assert owner.limits("other")["default"] == {"max_gpus": 1}  # unchanged


def test_cli_sets_edits_and_shows(hive_server, owner):
    out = admin_limits(hive_server, "--set", "default.max_gpus=2", "--set", "users.bob.max_kernels=1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["default"] == {"max_gpus": 2}
    out = admin_limits(hive_server, "--set", "users.bob.max_kernels=none", "--set", "groups.ta.max_priority=5",
                       "--json")
    doc = json.loads(out.stdout)
    assert doc["users"] == {} and doc["groups"] == {"ta": {"max_priority": 5}} and doc["default"] == {"max_gpus": 2}
    out = admin_limits(hive_server, "--show")
    assert out.returncode == 0 and "group ta" in out.stdout and "default" in out.stdout
    out = admin_limits(hive_server, "--set", "users.bob.max_gpu=1")
    assert out.returncode == 2 and "unknown limit 'max_gpu'" in out.stderr
    out = admin_limits(hive_server, "--set", "default.max_gpus=1", token=hive_server.tokens["bob"])
    assert out.returncode == 1 and "only admins" in out.stderr


def test_apply_settings_edits_a_copy():
    base = {"default": {"max_gpus": 2}, "groups": {}, "users": {"a.b": {"max_kernels": 1}}}
    new = apply_settings(base, ["users.a.b.max_gpus=3", "default.max_gpus=none"])
    assert new == {"default": {}, "groups": {}, "users": {"a.b": {"max_kernels": 1, "max_gpus": 3}}}
    assert base["default"] == {"max_gpus": 2}
    for bad in ["default=1", "nobody.max_gpus=1", "default.max_gpus=-1", "default.max_gpus=two", "users.max_gpus=1"]:
        with pytest.raises(BadSetting):
            apply_settings(base, [bad])
