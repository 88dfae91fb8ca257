"""The launchers are traitlets Configurables (issue 11): every option is listed by ``--help-all`` and
set as ``c.<Launcher>.<option>``, through the real server too."""

import subprocess
import sys


def test_help_all_lists_every_launcher_option():
    out = subprocess.run([sys.executable, "-m", "hive_lab_server", "--help-all"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    for option in ("--HiveLabApp.launcher=", "--LocalLauncher.hidden_env=", "--DockerLauncher.allowed_mount_roots=",
                   "--DockerLauncher.network_mode=", "--DockerLauncher.default_image=", "--SlurmLauncher.partition=",
                   "--SlurmLauncher.gres_mode=", "--SlurmLauncher.submit_as_user="):
        assert option in out, option
    assert "host dirs a job's data_dir/output_dir may lie under" in out  # the help text comes along


def test_config_reaches_the_launcher_of_a_real_server(live_server_factory):
    srv = live_server_factory(env={"HIVE_TEST_SECRET": "s3cret", "HIVE_TEST_PLAIN": "plain"},
                              config={"LocalLauncher": {"hidden_env": ["HIVE_TEST_SECRET"]}})
    r = srv.request("POST", "jobs", json={"command": 'echo "${HIVE_TEST_SECRET:-hidden} $HIVE_TEST_PLAIN"',
                                          "tasks": [{"gpus": 1}]})
    assert r.status_code == 201, r.text
    srv.wait_for_job(r.json()["id"], "succeeded")
    assert srv.request("GET", f"jobs/{r.json()['id']}/logs").json()["data"] == "hidden plain\n"

