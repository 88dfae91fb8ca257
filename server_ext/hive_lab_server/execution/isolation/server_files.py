"""The server's own secrets stay out of jobs' reach.

When jobs run under other accounts, anything the server reads that is readable by others leaks:
the Jupyter config files it loaded (a token map may sit in them), the token map file, and Jupyter's
runtime dir (its ``jpserver-*-open.html`` holds the server's token, written with the umask's mode).
At start, ``protect`` makes those the server owns owner-only (files 0600, dirs 0700) and says so in the
log; those owned by someone else are only reported. (The store is created 0600 by ``Store``.)
"""

from __future__ import annotations

import os
import stat


def protect(paths, log) -> list[str]:
    """chmod 0600 (dirs: 0700) each existing path of ``paths`` that the server owns and others may
    read; returns them."""
    fixed = []
    for path in dict.fromkeys(p for p in paths if p):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) or not st.st_mode & 0o077:
            continue
        if st.st_uid != os.geteuid():
            log.warning("hive-lab: %s is readable by others (mode %o) and not ours to fix; jobs may read it",
                        path, st.st_mode & 0o777)
            continue
        mode = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        os.chmod(path, mode)
        fixed.append(path)
        log.warning("hive-lab: %s was readable by others (mode %o); made it %o so jobs cannot read it",
                    path, st.st_mode & 0o777, mode)
    return fixed


def server_secret_files(app) -> list[str]:
    """What a job must not read: config files the server loaded, the token map file, the runtime dir."""
    server = app.serverapp
    paths = [getattr(server, "runtime_dir", "")] + list(getattr(server, "loaded_config_files", []) or []) + list(getattr(app, "loaded_config_files", []) or [])
    provider = getattr(server, "identity_provider", None)
    users_file = getattr(provider, "users_file", "")
    if users_file:
        paths.append(users_file)
    return paths
