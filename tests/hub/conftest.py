"""One real JupyterHub for every test in tests/hub (starting one takes most of the module's time).

Two courses (Hub groups ``cv-101``, ``nlp-201``; one GPU each, ``vc_access`` by ``@group``), two
students (one per course) and an instructor (group ``instructors``, which ``hive-lab hub-config``'s
fragment grants ``custom:hive-lab:admin``). The students' servers run, as their own Unix accounts;
ann has installed a ``hive`` GPU kernelspec for herself.
"""

from __future__ import annotations

import pwd
import subprocess

import pytest
from hub_people import ANN, BOB, COURSES, IVY


@pytest.fixture(scope="session")
def hub(hub_factory):
    hub = hub_factory(
        users={ANN: ["cv-101"], BOB: ["nlp-201"], IVY: ["instructors"]},
        hive_config={
            "cluster_config": {"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": COURSES},
            "vc_access": {"@cv-101": ["cv-101"], "@nlp-201": ["nlp-201"]},
        },
    )
    account = pwd.getpwnam(ANN)
    subprocess.run(
        [str(hub.venv_bin / "python"), "-m", "hive_lab.cli", "kernelspec", "install", "--name", "hive-gpu-1",
         "--gpus", "1", "--user"],
        check=True, capture_output=True, user=account.pw_uid, group=account.pw_gid,
        env={"HOME": account.pw_dir, "PATH": f"{hub.venv_bin}:/usr/bin:/bin"}, cwd=account.pw_dir,
    )
    hub.start_servers(ANN, BOB)
    return hub
