"""What a container is allowed to see: the rules of ``docker_spec`` (no engine needed)."""

import os

import pytest

from hive_lab_server.execution.launchers.base import LaunchError, TaskLaunch
from hive_lab_server.execution.launchers.docker_spec import ContainerPolicy, container_kwargs, container_name


def task(tmp_path, **kw) -> TaskLaunch:
    base = dict(
        job_id="j-000001",
        task="main-0",
        group="main",
        index=0,
        rank=0,
        node="node-0",
        gpu_indices=(),
        gpu_uuids=None,
        command="true",
        env={"HIVE_JOB_ID": "j-000001", "PATH": "/host/venv/bin:/usr/bin", "HOME": "/root"},
        working_dir=str(tmp_path),
        log_path=str(tmp_path / "main-0.log"),
        image="img:1",
    )
    base.update(kw)
    return TaskLaunch(**base)


def test_no_privileges_and_limits(tmp_path):
    kw = container_kwargs(task(tmp_path, cpus=1.5, memory_mb=256), {"a": "b"}, ContainerPolicy())
    assert kw["privileged"] is False
    assert kw["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in kw["security_opt"]
    assert kw["nano_cpus"] == 1_500_000_000
    assert kw["mem_limit"] == kw["memswap_limit"] == "256m"
    assert kw["user"] == f"{os.getuid()}:{os.getgid()}"
    assert kw["command"] == ["/bin/sh", "-c", "true"]
    assert kw["working_dir"] == str(tmp_path)
    assert [m["Target"] for m in kw["mounts"]] == [str(tmp_path)]
    assert "device_requests" not in kw


def test_env_as_given_without_host_only_variables(tmp_path):
    env = container_kwargs(task(tmp_path), {}, ContainerPolicy())["environment"]
    assert env["HIVE_JOB_ID"] == "j-000001"
    assert "PATH" not in env  # the image's PATH, not the server's venv
    assert env["HOME"] == str(tmp_path)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"  # no GPU granted: a CUDA image gets none


def test_real_gpus_by_uuid(tmp_path):
    t = task(tmp_path, gpu_indices=(1, 3), gpu_uuids=("GPU-aaa", "GPU-bbb"))
    kw = container_kwargs(t, {}, ContainerPolicy())
    (req,) = kw["device_requests"]
    assert req["Driver"] == "nvidia" and req["DeviceIDs"] == ["GPU-aaa", "GPU-bbb"]
    assert req["Capabilities"] == [["gpu"]]
    assert kw["environment"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"


def test_simulated_gpus_only_env(tmp_path):
    t = task(tmp_path, gpu_indices=(2,), env={"CUDA_VISIBLE_DEVICES": "2"})
    kw = container_kwargs(t, {}, ContainerPolicy())
    assert "device_requests" not in kw
    assert kw["environment"]["CUDA_VISIBLE_DEVICES"] == "2"
    assert "NVIDIA_VISIBLE_DEVICES" not in kw["environment"]


def test_mounts_only_under_allowed_roots(tmp_path):
    allowed = tmp_path / "datasets"
    (allowed / "imagenet").mkdir(parents=True)
    work = tmp_path / "job"
    work.mkdir()
    policy = ContainerPolicy(allowed_mount_roots=(str(allowed),))
    kw = container_kwargs(
        task(work, data_dir=str(allowed / "imagenet"), output_dir=str(allowed / "out")), {}, policy
    )
    mounts = {m["Target"]: m for m in kw["mounts"]}
    assert mounts[str(allowed / "imagenet")]["ReadOnly"] is True
    assert not mounts[str(allowed / "out")].get("ReadOnly")
    with pytest.raises(LaunchError) as err:
        container_kwargs(task(work, data_dir="/etc"), {}, policy)
    assert "'/etc'" in str(err.value) and str(allowed) in str(err.value)
    # a symlink does not smuggle a path out of the allowed root
    (allowed / "sneaky").symlink_to("/etc")
    with pytest.raises(LaunchError):
        container_kwargs(task(work, data_dir=str(allowed / "sneaky")), {}, policy)
    with pytest.raises(LaunchError) as err:
        container_kwargs(task(work, output_dir="/var/tmp/x"), {}, ContainerPolicy())
    assert "none configured" in str(err.value)


def test_network_isolation_option(tmp_path):
    kw = container_kwargs(task(tmp_path), {}, ContainerPolicy(network_mode="none"))
    assert kw["network_mode"] == "none"


def test_image_required(tmp_path):
    with pytest.raises(LaunchError, match="no image"):
        container_kwargs(task(tmp_path, image=None), {}, ContainerPolicy())
    assert container_kwargs(task(tmp_path, image=None), {}, ContainerPolicy(default_image="d:1"))["image"] == "d:1"


def test_container_names_are_valid():
    assert container_name("j-1", "main-0") == "hive-lab-j-1-main-0"
    assert container_name("j/1", "a b") == "hive-lab-j_1-a_b"


@pytest.fixture
def nosuid_dir(tmp_path):
    """A dir on a nosuid mount (a bind mount of itself), as the server makes its jobs root; needs root."""
    import subprocess

    from hive_lab_server.execution.isolation.gpu_access import ensure_nosuid

    if os.geteuid() != 0:
        pytest.skip("needs root: makes a nosuid bind mount")
    d = tmp_path / "nosuid"
    d.mkdir()
    assert ensure_nosuid(d) and not ensure_nosuid(d)  # made once, then already there
    yield d
    subprocess.run(["/usr/bin/umount", "--lazy", str(d)], check=False)


def test_only_a_container_granted_gpus_gets_the_gpu_devices_group(nosuid_dir):
    """GPUs through the group of the nodes (the NVIDIA runtime hands containers the host's nodes):
    only for a container granted GPUs, and only when its writable mounts are nosuid."""
    policy = ContainerPolicy(user="1001:1001", gpu_gid=987)
    with_gpus = container_kwargs(task(nosuid_dir, gpu_indices=(1,), gpu_uuids=("GPU-aaa",)), {}, policy)
    assert with_gpus["group_add"] == ["987"]
    assert "group_add" not in container_kwargs(task(nosuid_dir), {}, policy)
    assert "group_add" not in container_kwargs(task(nosuid_dir, gpu_indices=(1,)), {}, ContainerPolicy())


def test_a_gpu_container_with_a_writable_mount_that_honours_setgid_is_refused(tmp_path, nosuid_dir):
    """A setgid file of the GPU group left in a mount that is not nosuid would open the GPUs from the
    user's own shell after the job: such a container is refused with a sentence, not started."""
    policy = ContainerPolicy(user="1001:1001", gpu_gid=987)
    with pytest.raises(LaunchError, match="not on a nosuid mount"):
        container_kwargs(task(tmp_path, gpu_indices=(1,)), {}, policy)
    outside = tmp_path / "out"
    policy_out = ContainerPolicy(user="1001:1001", gpu_gid=987, allowed_mount_roots=(str(tmp_path),))
    with pytest.raises(LaunchError, match="output_dir .* not on a nosuid mount"):
        container_kwargs(task(nosuid_dir, gpu_indices=(1,), output_dir=str(outside)), {}, policy_out)
    assert "group_add" not in container_kwargs(task(tmp_path), {}, policy)  # no GPUs: no group, no check
