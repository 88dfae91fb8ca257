"""``hive-lab course init|check`` into a temporary root: one command writes a Hub config, the service's
settings and the course kernelspec that agree, with the modes students need and safe defaults for a
class (priorities, queue, processes, GPU kernels' caps; the machine's name, CPUs and memory); running it
again changes nothing, or applies new options and says which lines, and keeps the instructor's own
settings (their local files, and lines added to the files init owns); ``check`` finds each inconsistency
of issue 26 with a sentence saying what to change. (tests/hub/test_hub_course.py starts a real Hub from
what it writes; tests/server/test_course_service.py runs the service on it.)"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import stat

import pytest

from hive_lab.cli import main
from hive_lab.cli.course import (HUB_FILE, HUB_LOCAL, KERNELS_DIR, PROFILE_FILE, SERVICE_FILE, SERVICE_LOCAL,
                                 check_course, levels_for)
from hive_lab.cli.hub_config import config_value, load

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
    cluster = config_value(svc, "cluster_config", None)
    assert cluster["vcs"] == {"cv-101": 8} and cluster["levels"] == ["pair", "quad"]
    assert config_value(svc, "vc_access", None) == {"@cv-101": ["cv-101"], "@instructors": ["cv-101"]}
    assert config_value(svc, "user_limits", None)["cv-101"]["default"]["max_gpus"] == 2
    assert config_value(svc, "vc_time_limits", None)["cv-101"]["default_s"] == 7200
    # the Hub: the service, its users (JupyterHub >= 5), the groups the VC and the admin role name
    assert config_value(hub.Authenticator, "allowed_users", None) == {"ann", "bob", "ivy"}
    groups = config_value(hub.JupyterHub, "load_groups", None)
    assert groups == {"cv-101": {"users": ["ann", "bob"]}, "instructors": {"users": ["ivy"]}}
    roles = config_value(hub.JupyterHub, "load_roles", [])
    assert any(r["name"] == "hive-lab-admin" and r["groups"] == ["instructors"] for r in roles)
    service = next(s for s in config_value(hub.JupyterHub, "services", []) if s["name"] == "hive-lab")
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
    assert "written" not in out and out.count("unchanged: ") == 4 and out.count("kept: ") == 2, out
    assert {p: p.read_bytes() for p in course.rglob("*") if p.is_file()} == before
    other = tmp_path / "other"
    (other / "etc/jupyterhub").mkdir(parents=True)
    (other / HUB_FILE).write_text("c.JupyterHub.port = 8000  # the admin's own\n")
    assert main([*INIT, "--root", str(other)]) == 1
    assert "was not written by `hive-lab course init`" in capsys.readouterr().err
    assert (other / HUB_FILE).read_text() == "c.JupyterHub.port = 8000  # the admin's own\n"


def test_safe_defaults_for_a_class_from_this_machine(course):
    svc = load(course / SERVICE_FILE)
    app = svc.HiveLabApp
    limits = config_value(app, "user_limits", None)["cv-101"]
    # no student outranks a classmate (everyone's default priority is 0); the instructors' group may
    assert limits["default"]["max_priority"] == 0 and limits["default"]["max_queued_jobs"] == 10
    assert limits["groups"]["instructors"]["max_priority"] == 1000
    assert svc.Isolation.pids_max == 512
    # every GPU kernel of the course: the idle cull and a time limit, whatever its kernelspec says
    assert config_value(app, "kernel_limits", None) == {"cv-101": {"max_idle_s": 1800.0, "max_time_limit_s": 43200.0}}
    cluster = config_value(app, "cluster_config", None)
    assert cluster["nodes"] == [socket.gethostname()]  # the service finds this machine's GPUs on it
    assert cluster["cpus_per_node"] == os.cpu_count()
    meminfo = dict(line.split(":", 1) for line in pathlib.Path("/proc/meminfo").read_text().splitlines())
    assert cluster["memory_mb_per_node"] == int(meminfo["MemTotal"].split()[0]) // 1024
    from hive_lab_server.cluster import resolve_cluster

    node = resolve_cluster(cluster, "none").config.nodes[socket.gethostname()]
    assert node.cpus == os.cpu_count()


def test_each_default_has_an_option(tmp_path, capsys):
    root = tmp_path / "root"
    assert main([*INIT, "--root", str(root), "--max-priority", "5", "--instructors-max-priority", "900",
                 "--max-queued-jobs", "3", "--pids-max", "64", "--idle-timeout", "10m", "--max-time-limit", "3h",
                 "--node", "gpu-box", "--cpus-per-node", "16", "--memory-mb-per-node", "64000"]) == 0, \
        capsys.readouterr().err
    svc = load(root / SERVICE_FILE)
    limits = config_value(svc.HiveLabApp, "user_limits", None)["cv-101"]
    assert limits["default"]["max_priority"] == 5 and limits["default"]["max_queued_jobs"] == 3
    assert limits["groups"]["instructors"]["max_priority"] == 900
    assert svc.Isolation.pids_max == 64
    assert config_value(svc.HiveLabApp, "kernel_limits", None) == {"cv-101": {"max_idle_s": 600.0, "max_time_limit_s": 10800.0}}
    cluster = config_value(svc.HiveLabApp, "cluster_config", None)
    assert (cluster["nodes"], cluster["cpus_per_node"], cluster["memory_mb_per_node"]) == (["gpu-box"], 16, 64000)
    # several machines: each is named (a made-up node-1 would never match a machine)
    assert main(["course", "init", "--name", "x", "--gpus", "8", "--gpus-per-node", "4", "--students", "a",
                 "--root", str(tmp_path / "two")]) == 2
    assert "need 2 machines: name each with --node" in capsys.readouterr().err
    assert main(["course", "init", "--name", "x", "--gpus", "8", "--gpus-per-node", "4", "--students", "a",
                 "--node", "g0,g1", "--root", str(tmp_path / "two")]) == 0, capsys.readouterr().err
    assert config_value(load(tmp_path / "two" / SERVICE_FILE).HiveLabApp, "cluster_config", None)["nodes"] == ["g0", "g1"]


def test_init_again_keeps_the_instructors_lines_and_says_what_it_changed(course, capsys):
    """The documented way to add a late student: run init again. What the instructor added (in the local
    files, or by hand in the files init owns) stays in force; init names every line it changed or moved."""
    svc_local, hub_local = course / SERVICE_LOCAL, course / HUB_LOCAL
    assert mode(svc_local) == mode(hub_local) == 0o600
    assert "never rewrites this file" in svc_local.read_text() and "never rewrites this file" in hub_local.read_text()
    with open(svc_local, "a") as f:
        f.write("c.HiveLabApp.gpu_sample_interval_s = 2.0\n")
    with open(hub_local, "a") as f:
        f.write("c.JupyterHub.port = 8001\n")
    # and by hand, in the files init owns: a new line, and the node renamed
    edit(course / SERVICE_FILE, "c.HiveLabApp.launcher = 'local'\n",
         "c.HiveLabApp.launcher = 'local'\nc.HiveLabApp.nvml_backend = \"none\"\n")
    edit(course / SERVICE_FILE, f"'nodes': ['{socket.gethostname()}']", "'nodes': ['gpu-box']")
    edit(course / HUB_FILE, "c.Spawner.default_url", "c.Spawner.http_timeout = 120\nc.Spawner.default_url")
    with open(course / HUB_FILE, "a") as f:  # and at its very end
        f.write("c.Spawner.start_timeout = 90\n")

    assert main([*INIT[:INIT.index("ann,bob")], "ann,bob,cy", *INIT[INIT.index("ann,bob") + 1:],
                 "--root", str(course)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "written" not in out
    assert f"moved 2 line(s) you had added or changed in {course / SERVICE_FILE}" in out, out
    assert 'c.HiveLabApp.nvml_backend = "none"' in out and "'nodes': ['gpu-box']" in out
    assert f"moved 2 line(s) you had added or changed in {course / HUB_FILE}" in out, out
    assert "  + c.JupyterHub.load_groups = {'cv-101': {'users': ['ann', 'bob', 'cy']}" in out, out
    assert "  - c.JupyterHub.load_groups = {'cv-101': {'users': ['ann', 'bob']}" in out, out
    # in force: what the service (--config) and the Hub load is the owned file plus the local one
    svc, hub = load(course / SERVICE_FILE), load(course / HUB_FILE)
    assert svc.HiveLabApp.gpu_sample_interval_s == 2.0 and svc.HiveLabApp.nvml_backend == "none"
    assert config_value(svc.HiveLabApp, "cluster_config", None)["nodes"] == ["gpu-box"]
    assert hub.JupyterHub.port == 8001 and hub.Spawner.http_timeout == 120 and hub.Spawner.start_timeout == 90
    assert config_value(hub.Authenticator, "allowed_users", None) == {"ann", "bob", "cy", "ivy"}  # the late student
    assert "c.Spawner.http_timeout = 120" in hub_local.read_text()
    # a third run: nothing left to move, nothing changes, the local files as they were
    before = {p: p.read_bytes() for p in (svc_local, hub_local, course / SERVICE_FILE, course / HUB_FILE)}
    assert main([*INIT[:INIT.index("ann,bob")], "ann,bob,cy", *INIT[INIT.index("ann,bob") + 1:],
                 "--root", str(course)]) == 0
    out = capsys.readouterr().out
    assert "moved" not in out and out.count("unchanged: ") == 4, out
    assert {p: p.read_bytes() for p in before} == before


def test_an_edit_that_does_not_run_alone_is_kept_commented_and_named(course, capsys):
    edit(course / HUB_FILE, '"oauth_no_confirm": True,', '"oauth_no_confirm": True,\n        "display": False,')
    assert main([*INIT, "--root", str(course)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "WARNING" in out and "merge them by hand" in out, out
    assert '#         "display": False,' in (course / HUB_LOCAL).read_text()
    assert load(course / HUB_FILE) is not None  # the Hub still starts


def test_simulated_gpus_for_a_machine_without_any(tmp_path, capsys):
    """``--simulate-gpus N``: the fake NVML describes this machine (its host name: the cluster's node) with
    N GPUs; their device nodes exist for isolation to lock and mask; the service finds its GPUs."""
    root = tmp_path / "root"
    assert main(["course", "init", "--name", "lab", "--simulate-gpus", "2", "--students", "ann",
                 "--root", str(root)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "simulated: 2 GPU GPU(s)" in out or "simulated: 2" in out, out
    svc = load(root / SERVICE_FILE)
    backend = svc.HiveLabApp.nvml_backend
    assert backend.startswith("fake:")
    assert svc.Isolation.gpu_device_glob == f"{root}/dev/nvidia[0-9]*"
    if os.geteuid() == 0:
        for i in range(2):
            st = os.lstat(root / "dev" / f"nvidia{i}")
            assert stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (195, i)
    from hive_lab_server.cluster import resolve_cluster

    cluster = resolve_cluster(config_value(svc.HiveLabApp, "cluster_config", None), backend)
    assert cluster.local is not None and cluster.local.node == socket.gethostname()
    assert sorted(cluster.gpu_uuids) == [(socket.gethostname(), 0), (socket.gethostname(), 1)]  # scheduled and monitored
    assert check_course(root) == []


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
    (lambda r: edit(r / SERVICE_FILE, "{'@cv-101': ['cv-101'],", "{'@cv-101': ['cv-101'], '@nlp-201': ['nlp-201'],"),
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


def test_a_file_of_an_older_init_keeps_the_line_its_instructor_added(course, capsys):
    """Files an older init wrote have the mark but no digest: a line setting an option init does not
    write is the instructor's (the reviewer's nvml_backend line), and is moved, not dropped."""
    path = course / SERVICE_FILE
    old = [line for line in path.read_text().splitlines()
           if not line.startswith("# course init's lines:") and "load_subconfig" not in line]
    old[0] = old[0].split(" [body digest")[0]
    old.append('c.HiveLabApp.nvml_backend = "none"')
    path.write_text("\n".join(old) + "\n")
    assert main([*INIT, "--root", str(course)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"moved 1 line(s) you had added or changed in {path}" in out, out
    assert load(path).HiveLabApp.nvml_backend == "none"
    # a backend whose description is missing is a problem the check names (it used to crash init)
    local = course / "etc/hive-lab/hive_lab_local.py"
    local.write_text(local.read_text() + 'c.HiveLabApp.nvml_backend = "fake:/nonexistent/hardware.yaml"\n')
    assert main([*INIT, "--root", str(course)]) == 1
    assert "nvml_backend 'fake:/nonexistent/hardware.yaml' cannot be read" in capsys.readouterr().err
