"""Running each job under its owner's identity, fenced in (issue 13).

- ``config.Isolation``: the admin's settings (``c.Isolation.*``): whose Unix account a job runs as,
  whether root may run jobs, cgroup limits, the per-task log size limit.
- ``accounts``: hive-lab user -> Unix account (uid, gid, groups, home).
- ``cgroups``: one cgroup per task (v2 when its controllers are there, else v1), killed as a whole.
- ``task_exec``: the only process that meets a task's input (command, env, working dir), and only after
  it dropped to the owner's account; each task in its own PID and mount namespace.
- ``gpu_access``: GPUs only through the scheduler, per task and never a standing right (host nodes
  root:root 0600; a local task granted GPUs gets its own nodes of them in its mount namespace, no group;
  Docker's group only with nosuid writable mounts).
- ``gpu_holders``: no GPU descriptor outlives its task: the sweep that kills processes holding a GPU's node
  (open or mapped) without the right to, when a GPU task ends and every ``gpu_sweep_interval_s``.
- ``safe_files``: reading files a job wrote without following its symlinks or hard links out.
- ``log_limit``: the process that copies a task's output into its log, up to a size limit (as nobody).
- ``authorizer``: in the token-map shared mode, only hive-lab's API for non-admins.
"""

from hive_lab_server.execution.isolation.accounts import Account, AccountError, resolve_account
from hive_lab_server.execution.isolation.config import Isolation

__all__ = ["Account", "AccountError", "Isolation", "resolve_account"]
