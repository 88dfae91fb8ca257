"""How a notebook kernel is represented as a hive-lab job (kind ``kernel``).

The service launches a kernel job like any job (container from its image via the docker launcher,
or a local process), so GPUs, limits, logs, preemption and recovery work the same for kernels. The
job's command is a small shell supervisor around the kernel command, so that *restarting* a kernel
keeps the job, hence its GPUs:

- it runs the kernel with the connection file staged into the job's working dir, its ``ip`` set to the
  node's address (``HIVE_NODE_ADDRESS``; ``0.0.0.0`` where that is a host name), which is where the
  provisioner points Jupyter (``placement[].address``);
- when the kernel process ends and ``.hive-kernel/keep`` exists, it waits (up to ``RESTART_WAIT_S``)
  for the provisioner to write ``.hive-kernel/go`` and runs the kernel again on the same GPUs;
  without ``keep`` (a real shutdown) it exits, the job ends and the GPUs are released;
- each kernel exit is appended to ``.hive-kernel/exits``, which is how the provisioner sees a
  restarting kernel go down while the job stays;
- the provisioner writes the time into ``.hive-kernel/alive`` every few seconds from submission on
  (queued or running); when that heartbeat is older than the lease (the Jupyter server holding the
  kernel died or restarted: nobody can reach this kernel any more), the service cancels the job, saying
  why (``lifecycle.kernel_leases``); a watchdog here stops the kernel ``WATCHDOG_SLACK_S`` later, should
  the service not be there to do it. Where the provisioner cannot see the job's working dir (no shared
  filesystem) there is no heartbeat file and the watchdog stays off.

The scheduler's client settings reach the kernel through this command (``HIVE_*`` variables are
reserved in job specs): ``HIVE_LAB_URL`` inline, ``HIVE_LAB_TOKEN`` from a staged file of the
owner's private working dir, so ``%%submit`` works inside the kernel. ``HIVE_JOB_ID`` is set by the
service for every task.
"""

from __future__ import annotations

import json
import shlex

KERNEL_DIR = ".hive-kernel"
CONNECTION_FILE = f"{KERNEL_DIR}/connection.json"
NOTICE_SCRIPT = f"{KERNEL_DIR}/notice.py"
RESTART_WAIT_S = 60
WATCHDOG_SLACK_S = 15  # the service ends an unreachable kernel's job at the lease; this is the fallback

# Runs at kernel start-up (IPKernelApp.exec_files): on the first cell executed, print what hive-lab
# has to say about this kernel (it waited for GPUs and why, which GPUs it holds, its idle limit, a
# previous kernel of this notebook that was shut down for idling). The provisioner writes the
# lines into .hive-kernel/notice.json once the job runs.
NOTICE_CODE = r'''
def _hive_lab_notice():
    import json, os
    ip = get_ipython()
    path = os.path.join(os.getcwd(), ".hive-kernel", "notice.json")

    def show(*_args, **_kwargs):
        try:
            ip.events.unregister("pre_run_cell", show)
        except ValueError:
            pass
        try:
            with open(path) as f:
                lines = json.load(f).get("lines", [])
        except (OSError, ValueError):
            return
        for line in lines:
            print(line)

    ip.events.register("pre_run_cell", show)


_hive_lab_notice()
del _hive_lab_notice
'''


def kernel_argv(argv: list[str], connection_file: str, python: str | None) -> list[str]:
    """The kernelspec's command with the staged connection file (and ``python`` in a container)."""
    out = [CONNECTION_FILE if a == connection_file else a for a in argv]
    if python:
        out[0] = python
    if any("ipykernel" in a for a in out):
        out.append(f"--IPKernelApp.exec_files={NOTICE_SCRIPT}")
    return out


def supervisor_command(argv: list[str], url: str | None, lease_s: int = 60, slack_s: int = WATCHDOG_SLACK_S) -> str:
    k = KERNEL_DIR
    exports = []
    if url:
        exports.append(f"export HIVE_LAB_URL={shlex.quote(url)}")
    exports.append(f'[ -r {k}/token ] && export HIVE_LAB_TOKEN="$(cat {k}/token)"')
    # the address the kernel binds: its node's (HIVE_NODE_ADDRESS, set by the service from the placement),
    # all interfaces where that is a host name; the provisioner connects to that address
    exports.append('case "${HIVE_NODE_ADDRESS:-}" in "") bind= ;; localhost) bind=127.0.0.1 ;; '
                   '*[!0-9.]*) bind=0.0.0.0 ;; *) bind=$HIVE_NODE_ADDRESS ;; esac')
    loops = RESTART_WAIT_S * 10
    check = max(1, min(5, lease_s // 3))
    # the watchdog: no heartbeat from the provisioner (its Jupyter server is gone) for lease_s -> stop
    watchdog = (
        f"( while sleep {check}; do now=$(date +%s); beat=$(cat {k}/alive 2>/dev/null) || continue; "
        f"[ \"$beat\" -gt 0 ] 2>/dev/null || continue; "
        f"if [ $((now - beat)) -gt {int(lease_s) + int(slack_s)} ]; then "
        f"echo 'hive-lab: no heartbeat from the Jupyter server holding this kernel for {int(lease_s)} s; stopping it' >&2; "
        f"rm -f {k}/keep; kill $kpid; exit; fi; done ) &"
    )
    return "\n".join(
        [
            *exports,
            f"mkdir -p {k} && chmod 700 {k} && touch {k}/keep",
            "while :; do",
            f"  rm -f {k}/go",
            r'  [ -z "$bind" ] || sed -i "s/\"ip\": *\"[^\"]*\"/\"ip\": \"$bind\"/" ' + CONNECTION_FILE,
            f"  {shlex.join(argv)} &",
            "  kpid=$!",
            f"  {watchdog}",
            "  wpid=$!",
            "  wait $kpid",
            "  rc=$?",
            "  kill $wpid 2>/dev/null",
            f'  echo "$rc" >> {k}/exits',
            "  i=0",
            f"  while [ -e {k}/keep ] && [ ! -e {k}/go ] && [ $i -lt {loops} ]; do i=$((i+1)); sleep 0.1; done",
            f"  [ -e {k}/keep ] && [ -e {k}/go ] || exit $rc",
            "done",
        ]
    )


def kernel_job_body(
    *,
    name: str,
    argv: list[str],
    connection_text: str,
    url: str | None,
    token: str | None,
    gpus: int,
    gpu_type: str | None,
    vc: str | None,
    image: str | None,
    cpus: float,
    memory_mb: int,
    env: dict[str, str],
    lease_s: int = 60,
    watchdog_slack_s: int = WATCHDOG_SLACK_S,
    time_limit_s: float | None = None,
) -> dict:
    """The ``POST jobs`` body of a kernel job (a time limit only when its kernelspec asks for one)."""
    files = {CONNECTION_FILE: connection_text, NOTICE_SCRIPT: NOTICE_CODE}
    if token:
        files[f"{KERNEL_DIR}/token"] = token
    task = {"name": "kernel", "count": 1, "gpus": gpus, "gpu_type": gpu_type, "cpus": cpus or 0,
            "memory_mb": memory_mb or 0}
    body = {
        "name": name,
        "kind": "kernel",
        "command": supervisor_command(argv, url, lease_s, watchdog_slack_s),
        "tasks": [task],
        "image": image,
        "env": env,
        "files": files,
    }
    if vc:
        body["vc"] = vc
    if time_limit_s:
        body["time_limit_s"] = time_limit_s
    return body


def notice_lines(job: dict, waited_s: float, queue_reason: str, idle_limit_s: float | None,
                 previous: str | None) -> list[str]:
    gpus = [g for p in job.get("placement") or [] for g in p.get("gpus", [])]
    n = len(gpus)
    lines = []
    if previous:
        lines.append(f"hive-lab: {previous}")
    share = job.get("gpus")
    if isinstance(share, float) and 0 < share < 1 and n == 1:  # a share of one GPU (gpus: 0.5, 0.25, 0.125)
        holding = f"a {share:g} share of GPU {gpus[0]}"
    else:
        holding = f"{n} GPU{'s' if n != 1 else ''} {gpus}" if n else "no GPU"
    lines.append(f"hive-lab: this kernel is job {job['id']} in VC {job.get('vc')}, holding {holding}.")
    if waited_s >= 1.0 or queue_reason:  # it was queued (however briefly): say so, and why
        why = f": {queue_reason}" if queue_reason else ""
        lines.append(f"hive-lab: it waited {waited_s:.0f} s in the queue for its GPUs{why}.")
    if idle_limit_s and n:
        lines.append(
            f"hive-lab: it is shut down (and its GPUs released) after {duration(idle_limit_s)} without execution."
        )
    return lines


def duration(s: float) -> str:
    if s >= 3600 and s % 3600 == 0:
        return f"{int(s // 3600)} h"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def dumps_notice(lines: list[str]) -> str:
    return json.dumps({"lines": lines})
