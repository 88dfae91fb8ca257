"""``hive-lab course init|check`` into a temporary root: one command writes a Hub config, the service's
settings and the course kernelspec that agree, with the modes students need; running it again changes
nothing; ``check`` finds each inconsistency of issue 26 with a sentence saying what to change.
(tests/hub/test_hub_course.py starts a real Hub from what it writes.)"""

from __future__ import annotations

import json
import pathlib
import stat

import pytest

from hive_lab.cli import main
from hive_lab.cli.course import HUB_FILE, KERNELS_DIR, PROFILE_FILE, SERVICE_FILE, check_course, levels_for
from hive_lab.cli.hub_config import _value, load

INIT = ["course", "init", "--name", "cv-101", "--gpus", "8", "--students", "ann,bob", "--instructors", "ivy",
        "--max-gpus", "2", "--time-limit", "2h"]


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def course(tmp_path, capsys):
    root = tmp_path / "root"
    assert main([*INIT, "--root", str(root)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return root


def test_init_writes_a_course_that_agrees_with_itself(course):
    hub = load(course / HUB_FILE)
    svc = load(course / SERVICE_FILE).HiveLabApp
    assert check_course(course) == []
    # the service: the course's VC with cells big enough for the per-student limit, the group's access
    cluster = _value(svc, "cluster_config", None)
    assert cluster["vcs"] == {"cv-101": 8} and cluster["levels"] == ["pair", "quad"]
    assert _value(svc, "vc_access", None) == {"@cv-101": ["cv-101"]}
    assert _value(svc, "user_limits", None)["cv-101"]["default"]["max_gpus"] == 2
    assert _value(svc, "vc_time_limits", None)["cv-101"]["default_s"] == 7200
    # the Hub: the service, its users (JupyterHub >= 5), the groups the VC and the admin role name
    assert _value(hub.Authenticator, "allowed_users", None) == {"ann", "bob", "ivy"}
    groups = _value(hub.JupyterHub, "load_groups", None)
    assert groups == {"cv-101": {"users": ["ann", "bob"]}, "instructors": {"users": ["ivy"]}}
    roles = _value(hub.JupyterHub, "load_roles", [])
    assert any(r["name"] == "hive-lab-admin" and r["groups"] == ["instructors"] for r in roles)
    service = next(s for s in _value(hub.JupyterHub, "services", []) if s["name"] == "hive-lab")
    assert f"--config={course / SERVICE_FILE}" in service["command"]
    # modes: secrets owner-only, the kernelspec and the jobs' root reachable by students
    assert mode(course / HUB_FILE) == mode(course / SERVICE_FILE) == 0o600
    kdir = course / KERNELS_DIR / "cv-101-gpu"
    assert mode(kdir) == 0o755 and mode(kdir / "kernel.json") == 0o644
    assert mode(course / "var/lib/hive-lab/jobs") == 0o711
    spec = json.loads((kdir / "kernel.json").read_text())
    assert spec["metadata"]["kernel_provisioner"]["config"]["vc"] == "cv-101"
    assert (course / PROFILE_FILE).is_file()


def test_init_again_changes_nothing_and_leaves_foreign_files_alone(course, capsys, tmp_path):
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    assert main([*INIT, "--root", str(course)]) == 0
    out = capsys.readouterr().out
    assert "written" not in out and out.count("unchanged") == 4, out
    assert {p: p.read_bytes() for p in course.rglob("*") if p.is_file()} == before
    other = tmp_path / "other"
    (other / "etc/jupyterhub").mkdir(parents=True)
    (other / HUB_FILE).write_text("c.JupyterHub.port = 8000  # the admin's own\n")
    assert main([*INIT, "--root", str(other)]) == 1
    assert "was not written by `hive-lab course init`" in capsys.readouterr().err
    assert (other / HUB_FILE).read_text() == "c.JupyterHub.port = 8000  # the admin's own\n"


def test_init_refuses_a_course_without_students_or_with_more_per_student_than_it_has(tmp_path, capsys):
    assert main(["course", "init", "--name", "x", "--gpus", "2", "--root", str(tmp_path)]) == 2
    assert "--students" in capsys.readouterr().err
    assert main(["course", "init", "--name", "x", "--gpus", "2", "--students", "a", "--max-gpus", "4",
                 "--root", str(tmp_path)]) == 2
    assert "--max-gpus 4 is more than the course's 2 GPUs" in capsys.readouterr().err
    assert not (tmp_path / HUB_FILE).exists()  # nothing half-written


def edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("breakage, sentence", [
    # the kernelspec installed 0700 by root: students do not see it
    (lambda r: (r / KERNELS_DIR / "cv-101-gpu").chmod(0o700), "students cannot read the kernelspec cv-101-gpu"),
    # a group mapped to a VC the cluster does not have
    (lambda r: edit(r / SERVICE_FILE, "{'@cv-101': ['cv-101']}", "{'@cv-101': ['cv-101'], '@nlp-201': ['nlp-201']}"),
     "nlp-201"),
    # the Hub has no such group
    (lambda r: edit(r / HUB_FILE, "{'cv-101': {'users'", "{'cv101': {'users'"), "load_groups does not create"),
    # JupyterHub >= 5 without allowed_users / allow_all
    (lambda r: edit(r / HUB_FILE, "c.Authenticator.allowed_users", "allowed"), "nobody can log in"),
    # no levels: 1-GPU cells, the 2-GPU per-student limit can never be used
    (lambda r: edit(r / SERVICE_FILE, "'gpus_per_node': 8, 'gpu_type': 'GPU', 'levels': ['pair', 'quad']",
                    "'gpus_per_node': 16, 'gpu_type': 'GPU', 'levels': []"), "largest cell holds 1 GPU(s)"),
    # the dirs the docs write into
    (lambda r: __import__("shutil").rmtree(r / "etc/jupyterhub"), "does not exist"),
    # hive-lab not on the PATH of students' terminals
    (lambda r: (r / PROFILE_FILE).unlink(), "will not find `hive-lab`"),
])
def test_check_names_each_inconsistency_and_what_to_change(course, capsys, breakage, sentence):
    breakage(course)
    problems = check_course(course)
    assert any(sentence in p for p in problems), problems
    assert main(["course", "check", "--root", str(course)]) == 1
    assert sentence in capsys.readouterr().err


def test_levels_split_nodes_in_two_down_to_pairs():
    assert levels_for(1) == [] and levels_for(2) == [] and levels_for(4) == ["pair"]
    assert levels_for(8) == ["pair", "quad"] and levels_for(6) == []
