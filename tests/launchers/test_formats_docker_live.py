"""A two-role OpenPAI v2 job (a parameter server and two workers) posted as it is and run for real on
the Docker launcher, in the locally built test image: the workers find the server through the
variables OpenPAI gives its tasks (PAI_HOST_IP_<role>_<i>, PAI_<role>_<i>_<port>_PORT), and a secret
reaches the tasks without ever being stored or shown in clear."""

from __future__ import annotations

import pytest

from fixtures.live_server import LiveServer

JOB = """
protocolVersion: 2
name: ps-and-workers
type: job
prerequisites:
  - {type: dockerimage, name: test_image, uri: "IMAGE"}
parameters:
  greeting: hello
secrets:
  token: s3cret-value
taskRoles:
  ps:
    instances: 1
    dockerImage: test_image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0, ports: {http: 1}}
    commands:
      - test "$(printf %s "<% $secrets.token %>" | sha256sum | cut -c1-16)" = bf496b76b91b8282 && echo "ps has its secret"
      - >-
        python3 -c "import os, socket;
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);
        s.bind(('0.0.0.0', int(os.environ['PAI_CONTAINER_HOST_http_PORT_LIST']))); s.listen();
        n = int(os.environ['PAI_TASK_ROLE_TASK_COUNT_worker']);
        [(c := s.accept()[0], c.sendall(('<% $parameters.greeting %> from ps to ' + c.recv(64).decode()).encode()), c.close())
         for _ in range(n)]; print('ps served', n)"
  worker:
    instances: 2
    dockerImage: test_image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 1}
    commands:
      - >-
        python3 -c "import os, socket, time;
        addr = (os.environ['PAI_HOST_IP_ps_0'], int(os.environ['PAI_ps_0_http_PORT']));
        me = os.environ['PAI_CURRENT_TASK_ROLE_NAME'] + '-' + os.environ['PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX'];
        exec('for _ in range(300):\\n try:\\n  c = socket.create_connection(addr); break\\n except OSError: time.sleep(0.1)');
        c.sendall(me.encode()); print(c.recv(128).decode())"
"""


@pytest.mark.docker
@pytest.mark.timeout(900)  # the first docker test may build the test image
def test_two_role_openpai_job_runs_and_its_tasks_find_each_other(tmp_path, docker_engine, docker_test_image):
    srv = LiveServer(
        tmp_path / "srv", cluster_config={"nodes": 2, "gpus_per_node": 4, "gpu_type": "V100", "vcs": {"default": 8}},
        launcher="docker", config={"DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False}},
    )
    try:
        srv.start()
        r = srv.request("POST", "jobs", data=JOB.replace("IMAGE", docker_test_image),
                        headers={"Content-Type": "application/yaml"})
        assert r.status_code == 201, r.text
        job = srv.wait_for_job(r.json()["id"], "succeeded", "failed", timeout=180)
        logs = {t: srv.request("GET", f"jobs/{job['id']}/logs", params={"task": t}).json()["data"]
                for t in ("ps-0", "worker-0", "worker-1")}
        assert job["state"] == "succeeded", (job, logs)
        assert "ps has its secret" in logs["ps-0"] and "ps served 2" in logs["ps-0"], logs
        assert "hello from ps to worker-0" in logs["worker-0"] and "hello from ps to worker-1" in logs["worker-1"], logs
        shown = srv.request("GET", f"jobs/{job['id']}").text
        assert "s3cret-value" not in shown
        assert "s3cret-value" not in srv.log()
        stored = [p for p in srv.db_path.parent.glob(srv.db_path.name + "*") if p.is_file()]
        assert stored and all(b"s3cret-value" not in p.read_bytes() for p in stored)
    finally:
        srv.close()
