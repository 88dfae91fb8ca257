"""`hive-lab` CLI commands as subprocesses against a REAL server."""

import json
import pathlib
import subprocess
import sys

HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")


def cli(srv, *args, user="ann", check=True):
    command, *rest = args
    out = subprocess.run([HIVE_LAB, command, "--url", srv.url, "--token", srv.tokens[user], *rest],
                         capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_submit_wait_jobs_logs(hive_server):
    out = cli(hive_server, "submit", "--wait", "--json", "--name", "cli", "--gpus", "1", "--",
              "python3", "-c", "print('hello from cli')")
    job = json.loads(out.stdout)
    assert job["state"] == "succeeded" and job["exit_code"] == 0
    listed = json.loads(cli(hive_server, "jobs", "--json").stdout)
    assert job["id"] in [j["id"] for j in listed["jobs"]]
    assert all(j["user"] == "ann" for j in listed["jobs"])
    assert cli(hive_server, "logs", job["id"]).stdout == "hello from cli\n"
    table = cli(hive_server, "jobs").stdout
    assert job["id"] in table and "succeeded" in table
    # cancelling a finished job: the server's 409 message, exit status 1
    out = cli(hive_server, "cancel", job["id"], check=False)
    assert out.returncode == 1 and job["id"] in out.stderr


def test_submit_spec_file_cancel_and_failure_exit_code(hive_server, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: sleeper\nvc: default\ncommand: sleep 60\ntasks: [{name: main, count: 1, gpus: 1}]\n")
    job = json.loads(cli(hive_server, "submit", str(spec), "--json").stdout)
    assert job["name"] == "sleeper"
    out = json.loads(cli(hive_server, "cancel", job["id"], "--json").stdout)
    assert out["jobs"][0]["id"] == job["id"]
    out = cli(hive_server, "submit", "--wait", "-c", "exit 3", check=False)
    assert out.returncode == 3 and "failed (exit code 3)" in out.stderr


def test_vcs_and_top(hive_server):
    vcs = json.loads(cli(hive_server, "vcs", "--json").stdout)["vcs"]
    assert {v["name"]: v["mine"] for v in vcs} == {"default": True, "other": False}
    assert "default" in cli(hive_server, "vcs").stdout
    top = cli(hive_server, "top", "--once").stdout
    assert "GPUs free" in top and "virtual clusters" in top and "queue" in top


def test_errors(hive_server, tmp_path):
    out = cli(hive_server, "submit", "--vc", "other", "-c", "true", check=False)
    assert out.returncode == 1 and "other" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([HIVE_LAB, "jobs", "--url", "http://127.0.0.1:9/"], capture_output=True, text=True)
    assert out.returncode == 1 and "Cannot reach the hive-lab server at http://127.0.0.1:9/" in out.stderr


def test_logs_follow_waits_for_the_job_and_streams(hive_server):
    job = json.loads(cli(hive_server, "submit", "--json", "--",
                         "sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; done").stdout)
    out = cli(hive_server, "logs", "-f", job["id"])
    assert out.stdout.split() == ["line1", "line2", "line3"]
    assert "succeeded" in out.stderr


def test_submit_wait_prints_the_output_and_plain_status_lines_once(hive_server):
    out = cli(hive_server, "submit", "--wait", "--name", "printed", "--",
              "python3", "-c", "import sys; print('out line'); print('err line', file=sys.stderr)")
    assert out.stdout == "out line\nerr line\n" or sorted(out.stdout.splitlines()) == ["err line", "out line"]
    lines = out.stderr.splitlines()
    assert lines[-1].startswith("j-") and "printed: succeeded (exit code 0)" in lines[-1]
    assert sum("printed: succeeded" in line for line in lines) == 1   # the final line once
    assert not any(".py:" in line for line in lines)                  # no log records with a source location
    assert all(line.startswith("j-") for line in lines)               # plain status lines only


def test_server_options_after_the_double_dash_are_refused(hive_server):
    out = subprocess.run([HIVE_LAB, "submit", "--wait", "--", "python3", "train.py", "--url", hive_server.url,
                          "--token", hive_server.tokens["bob"]], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "--url comes after `--`" in out.stderr and "put --url before `--`" in out.stderr
    # before the command they are hive-lab's; a command's own --token goes through -c
    out = cli(hive_server, "submit", "--wait", "-c", "echo --token abc", user="bob")
    assert out.stdout == "--token abc\n"


def test_outputs_lists_and_downloads_a_jobs_files(hive_server, tmp_path):
    out = cli(hive_server, "submit", "--wait", "--json", "-c",
              "mkdir -p \"$HIVE_OUTPUT_DIR/plots\" && echo 42 > \"$HIVE_OUTPUT_DIR/result.txt\" && "
              "echo png > \"$HIVE_OUTPUT_DIR/plots/a.png\"")
    job = json.loads(out.stdout)
    listed = cli(hive_server, "outputs", job["id"]).stdout
    assert "result.txt" in listed and "plots/a.png" in listed
    assert sorted(f["path"] for f in json.loads(cli(hive_server, "outputs", job["id"], "--json").stdout)["files"]) \
        == ["plots/a.png", "result.txt"]
    cli(hive_server, "outputs", job["id"], "--download", str(tmp_path / "dl"))
    assert (tmp_path / "dl" / "result.txt").read_text() == "42\n"
    assert (tmp_path / "dl" / "plots" / "a.png").read_text() == "png\n"
    out = cli(hive_server, "outputs", job["id"], user="bob", check=False)  # not bob's job
    assert out.returncode == 1 and "may not read" in out.stderr


def test_submit_task_flags_set_the_first_task(hive_server):
    job = json.loads(cli(hive_server, "submit", "--json", "--name", "flags", "--gpus", "1", "--gpu-type", "A100",
                         "--tasks", "2", "--cpus", "0.5", "--memory-mb", "512", "-c", "sleep 60").stdout)
    try:
        task = json.loads(cli(hive_server, "jobs", job["id"], "--json").stdout)["spec"]["tasks"][0]
        assert {k: task[k] for k in ("gpus", "gpu_type", "count", "cpus", "memory_mb")} == {
            "gpus": 1, "gpu_type": "A100", "count": 2, "cpus": 0.5, "memory_mb": 512}
    finally:
        cli(hive_server, "cancel", job["id"])
