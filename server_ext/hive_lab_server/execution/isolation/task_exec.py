"""Start one task's command under its owner's identity: the only place a task's user input meets the
process that launches it, and only after that process stopped being root.

Run by the local launcher's wrapper as ``python -I -S task_exec.py ...`` (no site, no PYTHON* variables,
an environment built from scratch, standard library only). Everything on the command line comes from
the launcher (ids, device paths); everything the user controls (the command, its environment, the
working dir) arrives through an inherited file descriptor (``--spec-fd``) that is read only after the
identity switch. Steps, as root:

1. ``--namespaces``: a new mount and PID namespace (mounts private, so nothing leaks back to the
   host): the task sees only its own processes (``ps``), and
2. ``--mask PATH``: each GPU device node the task was not granted is covered by a node it cannot open
   (a bind mount of ``--mask-node``, a root-owned node with mode 000): cgroup v1 and v2 alike.
3. ``--own PATH`` (its GPUs' nodes and the driver's control nodes): each is covered by a per-task node,
   the same device numbers owned by ``--uid`` with mode 0600, made on a tmpfs mounted (in this namespace
   only) on ``--own-dir`` (a root-only dir) and detached once every node is bind-mounted. The host's
   nodes stay ``root:root`` 0600: the task gets no group, so nothing it makes (a setgid copy, a hard
   link: another mount, ``EXDEV``) opens a GPU outside it (``gpu_access``).
4. fork; the child (PID 1 of the new namespace) mounts its own ``/proc``, drops to ``--uid``/``--gid``/
   ``--groups`` (setgroups, setresgid, setresuid: no way back), then reads the spec, changes into the
   working dir and runs ``/bin/sh -c COMMAND`` with exactly the spec's environment. As PID 1 it stays an
   init (reaps orphans, ignores the signals the launcher sends to the whole process group, which reach
   the command directly) and exits with the command's status (128 + N when a signal N ended it).

The root parent only waits (ignoring those signals too, so it outlives the task) and exits with the
child's status: the wrapper's ``times`` then still counts the task's CPU time.
"""

from __future__ import annotations

import os
import sys

import _signal as signal  # the C module: `signal` imports enum, which costs a task ~15 ms of start time

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
S_IFCHR = 0o020000
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)

_libc_fn = None  # libc's functions, bound on first use (only the namespaces need them)


def _libc_function(name: str):
    """``name`` from libc, returning a C int and keeping errno: the bare ``_ctypes`` module, since importing
    the ``ctypes`` package (types, struct, ...) costs a task ~20 ms of start time."""
    global _libc_fn
    if _libc_fn is None:
        import _ctypes

        class CInt(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = CInt

        class Libc:
            _handle = _ctypes.dlopen(None, os.RTLD_NOW)

        _libc_fn = lambda fn: Function((fn, Libc()))  # noqa: E731
    return _libc_fn(name)


def _call(name: str, *args) -> None:
    if _libc_function(name)(*args) != 0:
        import _ctypes

        err = _ctypes.get_errno()
        raise OSError(err, f"{name}{args[1:2] or ''}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _call("mount", source and source.encode(), target.encode(), fstype and fstype.encode(), flags,
          data and data.encode())


def _own_nodes(paths: list[str], stage: str, uid: int, gid: int) -> None:
    """Cover each of ``paths`` with a node of the same device numbers that only ``uid`` may open, made
    on a tmpfs that only this mount namespace ever sees, detached afterwards (the bind mounts keep their
    nodes; nothing else reaches them). The tmpfs is not ``nodev``: its nodes must open."""
    _mount("hive-gpu-nodes", stage, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0700,size=64k")
    try:
        for i, path in enumerate(paths):
            node = f"{stage}/{i}"
            os.mknod(node, S_IFCHR | 0o600, os.stat(path).st_rdev)
            os.chown(node, uid, gid)
            os.chmod(node, 0o600)
            _mount(node, path, None, MS_BIND)
    finally:
        _call("umount2", stage.encode(), MNT_DETACH)


def _parse(argv: list[str]) -> dict:
    opts: dict = {"mask": [], "groups": [], "uid": None, "gid": None, "namespaces": False,
                  "mask_node": None, "spec_fd": None, "own": [], "own_dir": None}
    it = iter(argv)
    for arg in it:
        if arg == "--namespaces":
            opts["namespaces"] = True
        elif arg == "--mask":
            opts["mask"].append(next(it))
        elif arg == "--own":
            opts["own"].append(next(it))
        elif arg == "--own-dir":
            opts["own_dir"] = next(it)
        elif arg == "--mask-node":
            opts["mask_node"] = next(it)
        elif arg == "--uid":
            opts["uid"] = int(next(it))
        elif arg == "--gid":
            opts["gid"] = int(next(it))
        elif arg == "--groups":
            opts["groups"] = [int(g) for g in next(it).split(",") if g]
        elif arg == "--spec-fd":
            opts["spec_fd"] = int(next(it))
        else:
            raise SystemExit(f"hive-lab task_exec: unknown argument {arg!r}")
    if opts["spec_fd"] is None:
        raise SystemExit("hive-lab task_exec: --spec-fd is required")
    if opts["own"] and (not opts["namespaces"] or opts["uid"] is None or opts["own_dir"] is None):
        raise SystemExit("hive-lab task_exec: --own needs --namespaces, --uid and --own-dir")
    return opts


def _ignore_stop_signals() -> None:
    for sig in FORWARDED:
        signal.signal(sig, lambda *_: None)


def _status_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _drop(uid: int | None, gid: int | None, groups: list[int]) -> None:
    if uid is None:
        return
    os.setgroups(groups or [gid])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise SystemExit("hive-lab task_exec: could not drop privileges")


def _read_spec(fd: int) -> dict:
    """The launcher's spec: NUL-separated fields, ``command``, ``cwd``, then ``NAME=value`` pairs (no NUL
    can be in any of them: the spec is refused at submit otherwise). Plain bytes, no json import."""
    chunks = []
    while True:
        block = os.read(fd, 1 << 16)
        if not block:
            break
        chunks.append(block)
    os.close(fd)
    fields = b"".join(chunks).decode("utf-8", "surrogateescape").split("\0")
    env = dict(item.split("=", 1) for item in fields[2:] if "=" in item)
    return {"command": fields[0], "cwd": fields[1], "env": env}


def encode_spec(command: str, cwd: str, env: dict[str, str]) -> bytes:
    """What ``_read_spec`` reads (used by the launcher)."""
    items = [command, cwd, *(f"{k}={v}" for k, v in env.items())]
    if any("\0" in item for item in items):
        raise ValueError("a NUL character in the task's command, working dir or environment")
    return "\0".join(items).encode("utf-8", "surrogateescape")


def _run_command(spec: dict, as_init: bool) -> None:
    """As the task's user: change into its working dir and run its command; never returns."""
    try:
        os.chdir(spec["cwd"])
    except OSError as exc:
        sys.stderr.write(f"hive-lab: cannot enter the working dir {spec['cwd']}: {exc.strerror}\n")
        os._exit(126)
    argv = ["/bin/sh", "-c", spec["command"]]
    env = {str(k): str(v) for k, v in spec["env"].items()}
    if not as_init:
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        os.execve("/bin/sh", argv, env)
    child = os.fork()
    if child == 0:
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        os.execve("/bin/sh", argv, env)
    code = 1
    while True:  # reap everything; leave with the command's own status
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            code = _status_code(status)
            break
    os._exit(code)


def main(argv: list[str]) -> None:
    opts = _parse(argv)
    _ignore_stop_signals()
    if opts["namespaces"]:
        try:
            _call("unshare", CLONE_NEWNS | CLONE_NEWPID)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            for path in opts["mask"]:
                _mount(opts["mask_node"], path, None, MS_BIND)
            if opts["own"]:
                _own_nodes(opts["own"], opts["own_dir"], opts["uid"], opts["gid"])
        except OSError as exc:  # never run the task half fenced in
            sys.stderr.write(f"hive-lab: cannot set up the task's namespace and device nodes: {exc}\n")
            sys.exit(125)
    child = os.fork()
    if child == 0:
        try:
            if opts["namespaces"]:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            _drop(opts["uid"], opts["gid"], opts["groups"])
            spec = _read_spec(opts["spec_fd"])
        except BaseException as exc:  # noqa: BLE001 - report and fail the task, never run it half set up
            sys.stderr.write(f"hive-lab: cannot start the task: {exc}\n")
            os._exit(125)
        _run_command(spec, as_init=opts["namespaces"])
    os.close(opts["spec_fd"])
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            status = 1 << 8
            break
    sys.exit(_status_code(status))


if __name__ == "__main__":
    main(sys.argv[1:])
