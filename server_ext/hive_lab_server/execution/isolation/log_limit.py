"""Copies a task's output (stdin) into its log (an fd opened by the launcher), up to a size limit.

Run by the local launcher as ``python -I -S log_limit.py MAX_BYTES LOG_FD [UID GID]`` in its own session,
outside the task's cgroup and identity, so the task can neither kill it nor lift the limit, and it
outlives a server restart. Started as root, it first drops to ``UID``/``GID`` (an unprivileged account
that is not the task's, ``nobody``): the task's output is never read by a root process. Past the limit it appends one truncation note and then reads and drops the rest (the
task never blocks on a full pipe). It ends when every writer (the task and its descendants) is gone.
Stand-alone on purpose: standard library only, nothing of hive_lab_server imported.

``python -I -S log_limit.py MAX_BYTES --receive [UID GID]``: a spare copier, started ahead of the task it will
serve (so a task's start spawns only its wrapper: issue 40, submit -> running). It drops privileges first, then
waits on its stdin, a Unix socket to the launcher, for the task's pipe and log descriptors (SCM_RIGHTS) and
copies as above; it leaves without copying anything when the socket closes first (the launcher closed, or
the server is gone).
"""

import os
import sys


def note(limit: int) -> bytes:
    return (f"\n[hive-lab: log truncated at {limit} bytes (c.Isolation.max_log_bytes); "
            f"further output of this task is dropped]\n").encode()


def drop(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid):
        raise SystemExit("hive-lab log_limit: could not drop privileges")


def receive(socket) -> int:
    """The log fd, once the launcher sent (pipe, log) on stdin; the pipe becomes stdin. Leaves on EOF."""
    sock = socket.socket(fileno=0)
    try:
        _, fds, _, _ = socket.recv_fds(sock, 16, 2)
    finally:
        sock.close()  # (fd 0)
    if len(fds) != 2:
        raise SystemExit(0)  # the launcher closed without a task for it
    pipe, out = fds
    os.dup2(pipe, 0)
    os.close(pipe)
    return out


def main() -> None:
    limit = int(sys.argv[1])
    spare = sys.argv[2] == "--receive"
    if spare:  # imported before the drop: nobody may not read the interpreter's own files (e.g. under /root)
        import socket
    if len(sys.argv) > 4:
        drop(int(sys.argv[3]), int(sys.argv[4]))
    out = receive(socket) if spare else int(sys.argv[2])
    written = os.fstat(out).st_size
    truncated = False
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return
        if truncated:
            continue
        room = limit - written
        if len(chunk) > room:
            chunk = chunk[:max(0, room)]
            truncated = True
        if chunk:
            os.write(out, chunk)
            written += len(chunk)
        if truncated:
            os.write(out, note(limit))


if __name__ == "__main__":
    main()
