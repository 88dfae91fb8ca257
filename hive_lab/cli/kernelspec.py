"""``hive-lab kernelspec install|remove``: GPU kernels whose provisioner asks the scheduler for GPUs.

The kernelspec uses the ``hive`` kernel provisioner (``hive_lab_server.kernels.provisioner``); its
``metadata.kernel_provisioner.config`` carries what the kernel asks for (gpus, gpu_type, vc, image).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from ..errors import BadRequest

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def kernel_json(args: argparse.Namespace) -> dict:
    gpus = args.gpus
    what = f"{gpus:g} {args.gpu_type + ' ' if args.gpu_type else ''}GPU{'s' if gpus > 1 or gpus == 0 else ''}"
    where = f", VC {args.vc}" if args.vc else ""
    image = f", {args.image}" if args.image else ""
    config = {"gpus": gpus, "gpu_type": args.gpu_type, "vc": args.vc, "image": args.image}
    if args.idle_timeout is not None:
        config["idle_timeout"] = args.idle_timeout
    if args.cpus:
        config["cpus"] = args.cpus
    if args.memory_mb:
        config["memory_mb"] = args.memory_mb
    if getattr(args, "time_limit", None):
        from ..durations import parse_duration

        config["time_limit_s"] = parse_duration(args.time_limit)
    return {
        # in a container the image's python3 runs the kernel; locally the Python running this command
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": args.display_name or f"Python 3 ({what}{where}{image})",
        "language": "python",
        "interrupt_mode": "message",  # the kernel may run in a container: interrupt over the control channel
        "metadata": {
            "debugger": False,
            "kernel_provisioner": {"provisioner_name": "hive", "config": config},
        },
    }


def _positive_or_zero(text: str) -> int | float:
    """A whole number of GPUs, or a share of one GPU (0.5, 0.25, 0.125)."""
    from ..submission import parse_gpus
    try:
        return parse_gpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def install(args: argparse.Namespace) -> int:
    from jupyter_client.kernelspec import KernelSpecManager

    if not NAME_RE.match(args.name):
        print(
            f"hive-lab kernelspec: --name {args.name!r}: use lower-case letters, digits, '.', '_' or '-'",
            file=sys.stderr,
        )
        return 2
    try:
        spec = kernel_json(args)
    except BadRequest as exc:
        print(f"hive-lab kernelspec: {exc}", file=sys.stderr)
        return 2
    user, prefix = args.user, args.prefix
    if not user and prefix is None and not _system_dir_writable():
        user = True  # a non-root user installs for themselves (the system dir would be a PermissionError)
    with tempfile.TemporaryDirectory() as tmp:
        # readable by everyone: installed system-wide by root (a course), students must see it (mkdtemp
        # makes 0700, and jupyter_client copies the mode)
        Path(tmp).chmod(0o755)
        (Path(tmp) / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
        (Path(tmp) / "kernel.json").chmod(0o644)
        # the launcher's tile shows a GPU, not the first letter of the name (JupyterLab reads logo-svg)
        logo = Path(tmp) / "logo-svg.svg"
        logo.write_bytes((Path(__file__).parent.parent / "resources" / "gpu-kernel.svg").read_bytes())
        logo.chmod(0o644)
        try:
            dest = KernelSpecManager().install_kernel_spec(
                tmp, kernel_name=args.name, user=user, prefix=prefix, replace=True
            )
        except PermissionError as exc:
            print(f"hive-lab kernelspec: cannot write {exc.filename or 'the kernels dir'} ({exc.strerror}); "
                  f"install for yourself with --user, or under a prefix you own with --prefix", file=sys.stderr)
            return 1
    scope = "for you only" if user else f"under {prefix}" if prefix else "for every user of this machine"
    print(f"installed kernelspec {args.name!r} ({spec['display_name']}) {scope}, in {dest}")
    return 0


def _system_dir_writable() -> bool:
    """Whether the system-wide kernels dir (jupyter_client's default target) can be written here."""
    import os

    from jupyter_core.paths import SYSTEM_JUPYTER_PATH

    target = Path(SYSTEM_JUPYTER_PATH[0]) / "kernels"
    while not target.exists() and target.parent != target:
        target = target.parent
    return os.access(target, os.W_OK)


def remove(args: argparse.Namespace) -> int:
    from jupyter_client.kernelspec import KernelSpecManager

    try:
        path = KernelSpecManager().remove_kernel_spec(args.name)
    except KeyError:
        print(f"hive-lab kernelspec: no kernelspec named {args.name!r}", file=sys.stderr)
        return 1
    print(f"removed {path}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("kernelspec", help="install GPU kernels scheduled by hive-lab")
    sub = parser.add_subparsers(dest="kernelspec_command", metavar="ACTION", required=True)

    inst = sub.add_parser("install", help="write a kernelspec whose kernels hold GPUs granted by the scheduler")
    inst.add_argument("--name", required=True, help="kernelspec name, e.g. gpu-1")
    inst.add_argument("--gpus", required=True, type=_positive_or_zero, help="GPUs the kernel holds, or a share of one GPU: 0.5, 0.25, 0.125")
    inst.add_argument("--gpu-type", default=None, help="GPU type (cell leaf type), e.g. A100")
    inst.add_argument("--vc", default=None, help="virtual cluster (default: the server's default VC)")
    inst.add_argument("--image", default=None, help="run the kernel in this container image (needs ipykernel)")
    inst.add_argument("--cpus", type=float, default=0, help="CPU limit")
    inst.add_argument("--memory-mb", type=_positive_or_zero, default=0, help="memory limit in MB")
    inst.add_argument("--idle-timeout", type=_positive_or_zero, default=None,
                      help="seconds without execution before the kernel is shut down and its GPUs released")
    inst.add_argument("--time-limit", default=None, metavar="DURATION",
                      help="optional run time limit of each kernel (2h, 90m, seconds); at it the kernel is "
                           "stopped and its GPUs released (default: none; idle kernels are culled anyway)")
    inst.add_argument("--display-name", default=None)
    where = inst.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user only")
    where.add_argument("--prefix", default=None, help="install under this prefix (e.g. sys.prefix)")
    inst.set_defaults(func=install)

    rm = sub.add_parser("remove", help="remove a kernelspec")
    rm.add_argument("--name", required=True)
    rm.set_defaults(func=remove)
