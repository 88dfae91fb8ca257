"""``hive-lab pause|resume JOB...``, ``hive-lab migrate JOB --gpu-type T``, ``hive-lab resize JOB --gpus N``.

The server decides who may (pause/resume: the job's owner or an admin; migrate/resize: admins) and
says why it refuses (403), why the job cannot do it now (409) or what to fix (400); that sentence is
printed as ``hive-lab: JOB: ...`` and the exit status is 1.
"""

from __future__ import annotations

from ._common import act_on_each, add_server_args, reports_errors


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a whole number of GPUs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"give at least 1 GPU, got {value}")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser("pause", help="pause jobs (checkpoint signal, stop, out of the queue until resumed)")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.add_argument("--reason", default="", help="said in the job's history")
    add_server_args(p)
    p.set_defaults(func=run, action="pause")

    p = subparsers.add_parser("resume", help="queue paused jobs again (they start from their checkpoint)")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.add_argument("--reason", default="", help="said in the job's history")
    add_server_args(p)
    p.set_defaults(func=run, action="resume")

    p = subparsers.add_parser("migrate", help="admins: move jobs to another GPU type, through a checkpoint")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.add_argument("--gpu-type", required=True, metavar="TYPE", help="the GPU type to move to, e.g. V100")
    p.add_argument("--reason", default="", help="said in the job's history")
    add_server_args(p)
    p.set_defaults(func=run, action="migrate")

    p = subparsers.add_parser("resize", help="admins: give an elastic job another GPU count, through a checkpoint")
    p.add_argument("jobs", nargs=1, metavar="JOB")
    p.add_argument("--gpus", required=True, type=_positive_int, metavar="N",
                   help="the new GPU count, within the job's min_gpus..max_gpus")
    p.add_argument("--reason", default="", help="said in the job's history")
    add_server_args(p)
    p.set_defaults(func=run, action="resize")


@reports_errors
def run(args) -> int:
    from ..format import status_line

    def act(client, job_id):
        if args.action == "migrate":
            job = client.migrate(job_id, args.gpu_type, args.reason)
        elif args.action == "resize":
            job = client.resize(job_id, args.gpus, args.reason)
        else:
            job = getattr(client, args.action)(job_id, args.reason)
        return job, status_line(job)

    return act_on_each(args, act)
