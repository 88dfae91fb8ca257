"""``hive-lab hub-config``: the fragment it prints is complete (``--check`` passes), is the one the docs
show, and ``--check`` names what is missing in incomplete configs. (tests/hub runs it in a real Hub.)"""

from __future__ import annotations

import pathlib

import pytest

from hive_lab.cli import main
from hive_lab.cli.hub_config import check, fragment

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "jupyterhub.md"


LOGIN = 'c.Authenticator.allowed_users = {"ann"}\n'  # JupyterHub >= 5 lets nobody in without it


def write(tmp_path, text: str, login: str = LOGIN) -> pathlib.Path:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text("c = get_config()\n" + login + text)
    path.chmod(0o600)
    return path


def test_the_printed_fragment_passes_the_check(tmp_path, capsys):
    assert main(["hub-config", "--port", "10555", "--admin-group", "staff"]) == 0
    printed = capsys.readouterr().out
    assert '"http://127.0.0.1:10555"' in printed and "'staff'" in printed
    config = write(tmp_path, printed)
    assert check(config) == []
    assert main(["hub-config", "--check", str(config)]) == 0


def test_the_docs_show_the_fragment_as_printed():
    assert fragment() in DOCS.read_text()


def test_the_fragment_keeps_the_admins_other_services_and_roles(tmp_path):
    config = write(tmp_path, 'c.JupyterHub.services = [{"name": "other", "api_token": "x"}]\n'
                             'c.JupyterHub.load_roles = [{"name": "r", "scopes": ["read:users"]}]\n' + fragment())
    from hive_lab.cli.hub_config import config_value, load

    hub = load(config).JupyterHub
    assert [s["name"] for s in config_value(hub, "services", [])] == ["other", "hive-lab"]
    assert [r["name"] for r in config_value(hub, "load_roles", [])] == ["r", "user", "hive-lab-admin"]


@pytest.mark.parametrize("drop, complaint", [
    ('"oauth_no_confirm": True,', "oauth_no_confirm"),
    ('"access:services!service=hive-lab",\n    "custom:hive-lab:admin",\n]', "server_token_scopes"),
    ('"HIVE_LAB_SERVICE_URL": hive_lab_url + "/services/hive-lab/",', "HIVE_LAB_SERVICE_URL"),
    ('"custom:hive-lab:admin": {"description": "Administer hive-lab: every VC, everyone\'s jobs and logs, drains."},',
     "custom_scopes"),
])
def test_check_names_what_is_missing(tmp_path, capsys, drop, complaint):
    text = fragment()
    assert drop in text
    replacement = "]" if drop.endswith("]") else ""
    config = write(tmp_path, text.replace(drop, replacement))
    problems = check(config)
    assert problems and any(complaint in p for p in problems), problems
    assert main(["hub-config", "--check", str(config)]) == 1
    assert complaint in capsys.readouterr().err


@pytest.mark.parametrize("login", ["c.Authenticator.allow_all = True\n", "c.PAMAuthenticator.allowed_groups = {'cv-101'}\n"])
def test_check_wants_someone_allowed_to_log_in(tmp_path, login):
    """JupyterHub >= 5 lets nobody in without allowed_users / allowed_groups / allow_all (issue 26)."""
    problems = check(write(tmp_path, fragment(), login=""))
    assert any("nobody can log in" in p and "allowed_users" in p for p in problems), problems
    assert check(write(tmp_path, fragment(), login=login)) == []


def test_check_of_a_hub_config_without_hive_lab_and_of_no_file(tmp_path):
    problems = check(write(tmp_path, "c.JupyterHub.port = 8000\n"))
    assert any('no service named "hive-lab"' in p for p in problems)
    assert check(tmp_path / "missing.py") == [f"{tmp_path / 'missing.py'} does not exist"]
    broken = write(tmp_path, "c.JupyterHub.services = [\n")
    assert check(broken)[0].startswith("cannot load")


def test_append_and_out_write_owner_only_files_in_dirs_they_create(tmp_path, capsys):
    """The Hub's config may hold secrets (issue 22: it stayed world-readable after `>>`)."""
    import os
    import stat

    hub_config = tmp_path / "etc" / "jupyterhub" / "jupyterhub_config.py"
    assert main(["hub-config", "--append", str(hub_config)]) == 0
    assert stat.S_IMODE(hub_config.stat().st_mode) == 0o600
    assert fragment() in hub_config.read_text()
    existing = tmp_path / "existing_config.py"
    existing.write_text("c = get_config()\nc.JupyterHub.port = 8000\n" + LOGIN)
    existing.chmod(0o644)
    assert main(["hub-config", "--append", str(existing)]) == 0
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600 and "c.JupyterHub.port = 8000" in existing.read_text()
    assert check(existing) == []
    service = tmp_path / "etc" / "hive-lab" / "hive_lab_config.py"
    assert main(["hub-config", "--service-config", "--out", str(service)]) == 0
    assert stat.S_IMODE(service.stat().st_mode) == 0o600 and "c.HiveLabApp" in service.read_text()
    os.chmod(existing, 0o644)
    assert any("chmod 600" in p for p in check(existing))


def test_the_printed_service_config_agrees_with_its_cluster_and_check_service_finds_what_does_not(tmp_path, capsys):
    """Issue 26: the example mapped Hub groups to VCs its own cluster did not have; every student was then
    told they may submit to no VC, and nothing said why."""
    service = tmp_path / "hive_lab_config.py"
    assert main(["hub-config", "--service-config", "--out", str(service)]) == 0
    assert main(["hub-config", "--check-service", str(service)]) == 0, capsys.readouterr().err
    broken = tmp_path / "broken_config.py"
    broken.write_text('c.HiveLabApp.cluster_config = "default"\nc.HiveLabApp.vc_access = {"@cv-101": ["cv-101"]}\n')
    broken.chmod(0o600)
    assert main(["hub-config", "--check-service", str(broken)]) == 1
    err = capsys.readouterr().err
    assert "'cv-101', which the cluster does not have (its VCs: default)" in err, err
