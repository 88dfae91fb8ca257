"""Running each job under its owner's identity, fenced in (issue 13).

- ``config.Isolation``: the admin's settings (``c.Isolation.*``): whose Unix account a job runs as,
  whether root may run jobs, cgroup limits, the per-task log size limit.
- ``accounts``: hive-lab user -> Unix account (uid, gid, groups, home).
- ``cgroups``: one cgroup per task (v2 when its controllers are there, else v1), killed as a whole.
- ``safe_files``: reading files a job wrote without following its symlinks or hard links out.
- ``log_limit``: the process that copies a task's output into its log, up to a size limit.
- ``authorizer``: in the token-map shared mode, only hive-lab's API for non-admins.
"""

from .accounts import Account, AccountError, resolve_account
from .config import Isolation

__all__ = ["Account", "AccountError", "Isolation", "resolve_account"]
