"""``hive-lab admin check-hardware``: an admin's cluster config against what (fake) NVML sees."""

import subprocess
import sys

import yaml


def check(tmp_path, fake_hardware, config: dict, hardware="workstation-4"):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "hive_lab.cli", "admin", "check-hardware", "--cluster", str(cluster),
         "--nvml-backend", f"fake:{fake_hardware(hardware)}"], capture_output=True, text=True)


def test_matching_config(tmp_path, fake_hardware):
    out = check(tmp_path, fake_hardware, {"nodes": ["ws"], "gpus_per_node": 4, "gpu_type": "A6000", "levels": ["pair"]})
    assert (out.returncode, out.stdout) == (0, "ws: the config matches the 4 GPUs NVML sees\n"), out.stderr


def test_differences_are_listed(tmp_path, fake_hardware):
    out = check(tmp_path, fake_hardware, {"nodes": ["ws"], "gpus_per_node": 8, "gpu_type": "V100"})
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0] == "node ws: NVML sees 4 GPUs (4x A6000), the config declares 8 (8x V100)"
    assert "node ws: the config declares GPU 7 (V100), which NVML does not see" in lines
    assert "node ws GPU 0: NVML sees NVIDIA RTX A6000 (type A6000), the config declares type V100" in lines


def test_machine_not_in_config(tmp_path, fake_hardware):
    out = check(tmp_path, fake_hardware, {"nodes": 2, "gpus_per_node": 4, "gpu_type": "A6000"})
    assert out.returncode == 1
    assert out.stdout.strip() == ("this machine (ws) is not a node of the configured cluster (configured nodes: "
                                  "node-0, node-1); its 4 GPUs will not be scheduled")


def test_bad_config_file_says_so(tmp_path, fake_hardware):
    out = check(tmp_path, fake_hardware, {"nodes": 1, "gpus_per_node": 0, "gpu_type": "A6000"})
    assert out.returncode == 1 and "gpus_per_node" in out.stderr
