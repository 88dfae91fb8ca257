"""Class paths admins' configs name keep working after the package reshuffle (issue 23): each old path
imports the module at its new path (the same classes), with a warning naming the new path; a real
server starts from a config written with the old paths."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys
import warnings

import pytest

from hive_lab_server.moved import MOVED, MovedPathWarning, new_path

SERVER = pathlib.Path(__file__).resolve().parents[2] / "server_ext"

# what admins' configs and installed metadata name, old -> (new module, class)
CONFIG_PATHS = [
    ("hive_lab_server.identity", "hive_lab_server.auth.identity", "TokenMapIdentityProvider"),
    ("hive_lab_server.isolation.authorizer", "hive_lab_server.execution.isolation.authorizer", "HiveLabAuthorizer"),
    ("hive_lab_server.isolation", "hive_lab_server.execution.isolation", "Isolation"),
    ("hive_lab_server.launchers.local", "hive_lab_server.execution.launchers.local", "LocalLauncher"),
    ("hive_lab_server.launchers.docker", "hive_lab_server.execution.launchers.docker", "DockerLauncher"),
    ("hive_lab_server.launchers.slurm", "hive_lab_server.execution.launchers.slurm", "SlurmLauncher"),
    ("hive_lab_server.provisioner", "hive_lab_server.kernels.provisioner", "HiveProvisioner"),
    ("hive_lab_server.access", "hive_lab_server.auth.access", "AccessPolicy"),
]


def _fresh_import(old: str):
    """Import ``old`` as a config would, the first time in this process (the warning comes on first import)."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        del sys.modules[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    return module, [w for w in caught if issubclass(w.category, MovedPathWarning)]


@pytest.mark.parametrize("old, new, cls", CONFIG_PATHS)
def test_each_config_class_path_still_imports_the_same_class_with_a_warning(old, new, cls):
    module, caught = _fresh_import(old)
    real = importlib.import_module(new)
    assert module is real and getattr(module, cls) is getattr(real, cls)
    assert real.__spec__.name == new  # the real module keeps its own name and spec
    assert any(f"{old} moved to {new}" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert issubclass(MovedPathWarning, DeprecationWarning)


def test_traitlets_import_item_and_the_launcher_loader_accept_old_paths():
    from traitlets.utils.importstring import import_item

    from hive_lab_server.auth.identity import TokenMapIdentityProvider
    from hive_lab_server.execution.launchers import launcher_class
    from hive_lab_server.execution.launchers.local import LocalLauncher

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MovedPathWarning)
        assert import_item("hive_lab_server.identity.TokenMapIdentityProvider") is TokenMapIdentityProvider
        assert launcher_class("hive_lab_server.launchers.local:LocalLauncher") is LocalLauncher
        assert launcher_class("hive_lab_server.launchers.local") is LocalLauncher  # by module: its one class


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_moved_module_has_its_alias_and_no_file_left_at_the_old_path(old):
    rel = pathlib.Path(*old.split("."))
    assert not (SERVER / f"{rel}.py").exists() and not (SERVER / rel).exists(), f"{old} exists again: drop it from MOVED"
    module, caught = _fresh_import(old)
    assert module is importlib.import_module(new_path(old)) and caught


def test_a_module_added_later_under_a_moved_package_is_found_through_its_old_package():
    assert new_path("hive_lab_server.isolation.anything_new") == "hive_lab_server.execution.isolation.anything_new"
    assert new_path("hive_lab_server.hardware.metrics") is None  # did not move: never aliased
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hive_lab_server.isolation.no_such_module")


def test_a_real_server_starts_from_a_config_with_the_old_paths(tmp_path):
    from fixtures.live_server import LiveServer

    srv = LiveServer(tmp_path / "srv", users={"ann": {}}, vc_access={"*": ["*"]}, config={
        "ServerApp": {"identity_provider_class": "hive_lab_server.identity.TokenMapIdentityProvider"},
        "HiveLabApp": {"launcher": "hive_lab_server.launchers.local:LocalLauncher"},
    })
    try:
        srv.start()
        assert srv.request("GET", "me", user="ann").json()["user"] == "ann"
        log = srv.log()
        assert "hive_lab_server.identity moved to hive_lab_server.auth.identity" in log, log[-3000:]
    finally:
        srv.close()


def test_python_dash_m_runs_the_module_at_its_new_path():
    r = subprocess.run([sys.executable, "-m", "hive_lab_server.openapi"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("openapi: 3.1"), r.stderr[-2000:]
    assert "hive_lab_server.openapi moved to hive_lab_server.api.openapi" in r.stderr
