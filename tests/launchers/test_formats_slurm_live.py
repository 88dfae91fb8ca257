"""A 2-node sbatch script posted as it is and run for real by hive-lab on the Slurm test cluster: its
two nodes find each other through SLURM_JOB_NODELIST (and hive-lab's MASTER_PORT), and its srun steps
get SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS as Slurm would give them."""

from __future__ import annotations

import pytest

from fixtures.live_server import LiveServer
from hive_lab_server.execution.slurm.cli import SlurmCLI
from hive_lab_server.execution.slurm.inventory import cluster_config_from_inventory, read_inventory

pytestmark = pytest.mark.slurm

SCRIPT = r"""#!/bin/bash
#SBATCH --job-name=two-nodes
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:4
#SBATCH --time=00:05:00

head=$(echo "$SLURM_JOB_NODELIST" | cut -d, -f1)
if [ "$SLURM_NODEID" = 0 ]; then
  python3 -c "
import os, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(os.environ['MASTER_PORT']))); s.listen()
c = s.accept()[0]; print('got:', c.recv(128).decode())"
else
  python3 -c "
import os, socket, time
for _ in range(300):
    try:
        c = socket.create_connection(('$head', int(os.environ['MASTER_PORT']))); break
    except OSError:
        time.sleep(0.1)
c.sendall(('hello from node ' + os.environ['SLURM_NODEID'] + ' of ' + os.environ['SLURM_JOB_NUM_NODES']).encode())"
fi
srun bash -c 'echo "rank $SLURM_PROCID/$SLURM_NTASKS local $SLURM_LOCALID node $SLURM_NODEID"' | sort
"""


def test_two_node_sbatch_runs_and_its_nodes_find_each_other(slurm_cluster, tmp_path):
    slurm_cluster.cancel_all()
    inv = read_inventory(SlurmCLI(slurm_cluster.slurm_conf))
    srv = LiveServer(
        tmp_path / "srv", cluster_config=cluster_config_from_inventory(inv, {"low": 16}), launcher="slurm",
        config={"SlurmLauncher": {"slurm_conf": slurm_cluster.slurm_conf, "slurm_poll_s": 0.3, "node_poll_s": 0.5},
                "HiveLabApp": {"nvml_backend": "none", "gpu_sample_interval_s": 0}},
        env={"SLURM_CONF": slurm_cluster.slurm_conf},
    )
    try:
        srv.start()
        r = srv.request("POST", "jobs", data=SCRIPT, headers={"Content-Type": "text/plain"})
        assert r.status_code == 201, r.text
        job = srv.wait_for_job(r.json()["id"], "succeeded", "failed", timeout=120)
        logs = {t: srv.request("GET", f"jobs/{job['id']}/logs", params={"task": t}).json()["data"]
                for t in ("node-0", "node-1")}
        assert job["state"] == "succeeded", (job, logs)
        # a whole node's GPUs each (4 of 4): two nodes (hive-lab places by GPUs; smaller asks may share one)
        assert len({p["node"] for p in job["placement"]}) == 2, job["placement"]
        assert "got: hello from node 1 of 2" in logs["node-0"], logs
        assert "rank 0/4 local 0 node 0\nrank 1/4 local 1 node 0\n" in logs["node-0"], logs
        assert "rank 2/4 local 0 node 1\nrank 3/4 local 1 node 1\n" in logs["node-1"], logs
    finally:
        srv.close()
        slurm_cluster.cancel_all()
