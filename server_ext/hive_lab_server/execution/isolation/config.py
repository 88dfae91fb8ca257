"""``Isolation``: the admin's isolation settings, configured like any traitlets class::

    c.Isolation.run_as = "auto"            # auto | owner | server
    c.Isolation.accounts = {"ann": "ann01"}  # hive-lab user -> Unix account (default: the same name)
    c.Isolation.allow_root = False
    c.Isolation.cgroups = "auto"           # auto | v2 | v1 | off
    c.Isolation.max_log_bytes = 256 * 2**20
    c.Isolation.gpu_sweep_interval_s = 5   # kill GPU descriptors held outside their task (0: at task end only)
"""

from __future__ import annotations

import os

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, validate
from traitlets.config import Configurable

from hive_lab_server.execution.isolation.accounts import Account, AccountError, resolve_account


class Isolation(Configurable):
    run_as = Enum(
        ["auto", "owner", "server"], "auto", config=True,
        help="""Whose Unix identity a job's tasks (and kernels) get. "owner": the owner's account (see
        `accounts`); the server must run as root (or as that account). "auto": "owner" when the server
        runs as root, else the server's own user (a personal install). "server": always the server's own
        user, even as root (trusted single-user machines only: every job then runs as root).""",
    )
    accounts = Dict(
        config=True, help="hive-lab user -> Unix account name; users not listed run as the account of the same name",
    )
    allow_root = Bool(False, config=True, help="let a user whose account is root (uid 0) run jobs as root")
    cgroups = Enum(
        ["auto", "v2", "v1", "off"], "auto", config=True,
        help="""Put each local task in its own cgroup (as Slurm's task/cgroup): "auto" uses cgroup v2 when
        its cpu, memory and pids controllers can be delegated, else the v1 hierarchies, else none.""",
    )
    cgroup_name = Unicode("hive-lab", config=True, help="the cgroup (in each hierarchy) holding the tasks' cgroups")
    pids_max = Int(0, config=True, help="most processes one task may have (cgroup pids.max); 0 = no limit")
    gpu_device_glob = Unicode(
        "/dev/nvidia[0-9]*", config=True,
        help="the GPUs' device nodes; a task may open only those of its GPUs (by minor number = GPU index)",
    )
    gpu_control_globs = List(
        Unicode(), ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
                    "/dev/nvidia-caps/*"], config=True,
        help="the NVIDIA driver's other device nodes (no GPU of its own), locked down with the GPUs' nodes",
    )
    gpu_group = Unicode(
        "hive-gpu", config=True,
        help="""Docker launcher only (the NVIDIA runtime hands containers the host's own nodes): the group
        owning the NVIDIA device nodes (mode 0660), held by containers granted GPUs, whose writable mounts
        must then be nosuid; nobody is a member (created with groupadd --system when missing). Local tasks
        never get it: they get their own device nodes. docs/isolation.md""",
    )
    lock_gpu_devices = Bool(
        True, config=True,
        help="""GPUs only through the scheduler: at every start of a server that isolates jobs (root),
        make the GPU device nodes root:root 0600 (root:<gpu_group> 0660 and a nosuid jobs root with the
        Docker launcher), so users' own processes cannot open them""",
    )
    nvidia_params_file = Unicode(
        "/proc/driver/nvidia/params", config=True,
        help="""where the NVIDIA driver lists its module parameters: a server that locks the GPUs' nodes
        (lock_gpu_devices) does not start when the driver would make them open again (ModifyDeviceFiles
        with other DeviceFileUID/GID/Mode); absent: no driver loaded, nothing to check. docs/isolation.md""",
    )
    gpu_sweep_interval_s = Float(
        5.0, config=True,
        help="""No GPU descriptor outlives its task: how often (seconds) a server that isolates jobs (root, with
        lock_gpu_devices) kills the processes that hold a GPU's device node open or mapped without the right
        to (not root, not in a running local task granted that GPU), e.g. a descriptor a user's own process
        took out of a running task through /proc/PID/root or a Unix socket. The nodes of a GPU task are also
        swept when it ends, whatever this says; 0: only then. isolation/gpu_holders.py, docs/isolation.md""",
    )
    namespaces = Bool(
        True, config=True,
        help="""each local task in its own PID and mount namespace (as root): it sees only its own processes,
        gets its own device nodes of its GPUs and the nodes of the others are covered (cgroup v1 and v2
        alike). With it off, local GPU jobs of other accounts are refused (never given a group)""",
    )
    min_uid = Int(
        1000, config=True,
        help="""users whose account has a smaller uid (system accounts: daemon, bin, ...) may not run jobs
        unless `accounts` maps them explicitly""",
    )
    shared_api_only = Bool(
        True, config=True,
        help="""In the token-map shared mode (TokenMapIdentityProvider), refuse every jupyter_server API
        (terminals, kernels, contents, sessions, ...) to non-admins: install HiveLabAuthorizer.""",
    )
    max_log_bytes = Int(
        256 * 2**20, config=True,
        help="largest log of one task (bytes); output beyond it is dropped after a truncation note. 0 = no limit",
    )

    @validate("gpu_sweep_interval_s")
    def _sweep_interval_not_negative(self, proposal):
        if proposal["value"] < 0:
            raise TraitError(f"c.Isolation.gpu_sweep_interval_s is {proposal['value']}: give a number of seconds, "
                             f"or 0 to sweep the GPUs' nodes only when a GPU task ends")
        return proposal["value"]

    @classmethod
    def server_identity(cls) -> "Isolation":
        """Everything runs as the server's own user: what direct constructions (tests, embedding) get."""
        return cls(run_as="server", cgroups="off", max_log_bytes=0)

    def gpu_globs(self) -> list[str]:
        return [self.gpu_device_glob, *self.gpu_control_globs]

    def isolates(self) -> bool:
        """Whether jobs run under their owners' accounts (not the server's) here."""
        return self.run_as == "owner" or (self.run_as == "auto" and os.geteuid() == 0)

    def account_for(self, user: str) -> Account | None:
        """The account ``user``'s tasks run as, or None when they run as the server's own user.

        Raises ``AccountError`` (shown to the user) when they may not run at all."""
        root = os.geteuid() == 0
        if self.run_as == "server" or (self.run_as == "auto" and not root):
            return None
        account = resolve_account(user, self.accounts, allow_root=self.allow_root, min_uid=self.min_uid)
        if account.uid == os.geteuid():
            return None if not root else account
        if not root:
            raise AccountError(f"cannot run {user!r}'s job as {account.name}: the server does not run as root "
                               f"(set c.Isolation.run_as = 'auto' or run the server as root)")
        return account
