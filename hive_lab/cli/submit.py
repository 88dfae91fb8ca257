"""``hive-lab submit [SPEC] [flags] [-- COMMAND...]``: submit a job from a YAML/JSON spec and/or flags."""

from __future__ import annotations

import pathlib
import shlex
import sys

import yaml

from ..errors import BadRequest
from ._common import add_server_args, client_from, print_json, reports_errors

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
# the flags that set the first task's fields: flag -> the field
TASK_FLAGS = {"gpus": "gpus", "gpu_type": "gpu_type", "tasks": "count", "cpus": "cpus", "memory_mb": "memory_mb",
              "gpu_memory_mb": "gpu_memory_mb"}



def _gpus_arg(text: str):
    import argparse

    from ..submission import parse_gpus
    try:
        return parse_gpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None

def register(subparsers) -> None:
    p = subparsers.add_parser(
        "submit", help="submit a job (spec file and/or flags)",
        description="Submit a job. SPEC is a YAML or JSON file in hive-lab's form (flags override its "
                    "fields; the command may follow `--`), or a job file of another platform sent as it is: "
                    "an OpenPAI job (v1 JSON, v2 YAML), an sbatch script, a Kubernetes Job/Pod or Volcano Job "
                    "manifest (docs/formats.md).")
    p.add_argument("words", nargs="*", metavar="[SPEC] [-- COMMAND ...]",
                   help="a YAML/JSON job spec file (*.yaml, *.yml, *.json; '-' for stdin), then the command")
    p.add_argument("--name")
    p.add_argument("--vc")
    p.add_argument("--gpus", type=_gpus_arg, help="GPUs per task, or a share of one GPU: 0.5, 0.25, 0.125")
    p.add_argument("--gpu-memory-mb", type=int, help="a share's GPU memory budget (default: its share of the GPU's)")
    p.add_argument("--gpu-type")
    p.add_argument("--tasks", type=int, help="number of tasks (gang-scheduled)")
    p.add_argument("--cpus", type=float)
    p.add_argument("--memory-mb", type=int)
    p.add_argument("--priority", help="0..1000 or 'opportunistic'")
    p.add_argument("--image")
    p.add_argument("--no-image", action="store_true",
                   help="on a server without containers (a personal install): run the commands of a job file that "
                        "names an image as processes; the job lists image as not applied")
    p.add_argument("--max-retries", type=int)
    p.add_argument("--working-dir")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--file", action="append", default=[], metavar="PATH",
                   help="stage a text file (or glob, or directory) into the working dir; repeatable")
    p.add_argument("-c", "--command", help="shell command (or give it after --)")
    p.add_argument("--notebook", metavar="PATH.ipynb",
                   help="run this notebook as the job (papermill): its executed copy becomes an output")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="with --notebook: a parameter, set after the notebook's cell tagged 'parameters' "
                        "(VALUE is read as JSON when it is JSON, else as a string); repeatable")
    p.add_argument("--time-limit", metavar="DURATION",
                   help="run time limit: 2h, 90m, 1h30m or seconds (default: the VC's); the job fails at it")
    p.add_argument("--array", metavar="INDICES[%N]",
                   help="a job array: one element per index, e.g. 0-49%%8 (at most 8 at once) or 1,3,5-9%%2; "
                        "each gets HIVE_ARRAY_INDEX (docs/arrays.md); with --sweep only a throttle, e.g. %%8")
    p.add_argument("--sweep", action="append", default=[], metavar="NAME=V1,V2",
                   help="a parameter sweep: one element per combination of the values; repeatable "
                        "(--sweep lr=0.1,0.01 --sweep bs=32,64); each gets HIVE_PARAM_<NAME> and HIVE_PARAMS_FILE")
    p.add_argument("--after", action="append", default=[], metavar="JOB[:WHEN]",
                   help="start only after JOB (an id, or the name of your newest job so named) ended as WHEN: "
                        "ok (default), failed or ended; repeatable, or comma-separated")
    p.add_argument("--dry-run", action="store_true",
                   help="only say what would happen now (start on which GPUs, or wait and why); submit nothing")
    p.add_argument("--wait", action="store_true", help="wait until the job ends (exit status: the job's)")
    p.add_argument("-f", "--follow", action="store_true", help="wait and stream the log")
    add_server_args(p)
    p.set_defaults(func=run)


def load_spec(path: str | None) -> dict:
    if not path:
        return {}
    try:
        text = sys.stdin.read() if path == "-" else pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadRequest(f"cannot read the spec file {path}: {exc.strerror}") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadRequest(f"{path} is not valid YAML/JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise BadRequest(f"{path} must hold a mapping (a job spec), got {type(spec).__name__}")
    return spec


def build_spec(args) -> dict:
    """The spec file with the flags applied on top."""
    from ..submission import collect_files, parse_priority

    words = list(args.words or [])
    _refuse_server_options_in_command(words, args)
    spec_path = words.pop(0) if words and (words[0] == "-" or words[0].lower().endswith(SPEC_SUFFIXES)) else None
    spec = load_spec(spec_path)
    openpai = "taskRoles" in spec or "jobName" in spec
    argv = words
    command = args.command or (shlex.join(argv) if argv else None)
    if openpai:
        given = [f"--{f.replace('_', '-')}" for f in TASK_FLAGS if getattr(args, f) is not None]
        if given or command:
            raise BadRequest(f"{', '.join(given + (['a command'] if command else []))}: flags for tasks and "
                             "the command apply to the native spec form; edit taskRoles in the OpenPAI spec instead")
        if args.name:
            spec["jobName"] = args.name
    else:
        for key in ("name", "vc", "image", "max_retries", "working_dir"):
            if getattr(args, key) is not None:
                spec[key] = getattr(args, key)
        if command:
            spec["command"] = command
        if not spec.get("name"):  # not the server's "job" for every job: what it runs (train.py)
            from ..submission import command_name

            named = command_name(spec.get("command") if isinstance(spec.get("command"), str) else None)
            if named:
                spec["name"] = named
        tasks = spec.get("tasks") or [{"name": "main"}]
        spec["tasks"] = tasks
        tasks[0].update({field: getattr(args, flag) for flag, field in TASK_FLAGS.items()
                         if getattr(args, flag) is not None})
        if args.file:
            files = dict(spec.get("files") or {})
            files.update(collect_files(args.file))  # relative to the current directory
            spec["files"] = files
    if args.vc and openpai:
        spec["vc"] = args.vc
    if args.priority is not None:
        spec["priority"] = parse_priority(args.priority)
    if getattr(args, "time_limit", None) is not None:
        from ..durations import parse_duration

        if openpai:
            raise BadRequest("--time-limit applies to the native spec form (time_limit_s); the OpenPAI form has "
                             "no time limit field", field="time_limit_s")
        spec["time_limit_s"] = parse_duration(args.time_limit)
    for item in args.env:
        if "=" not in item:
            raise BadRequest(f"--env takes KEY=VALUE, got {item!r}", field="env")
        key, value = item.split("=", 1)
        spec.setdefault("jobEnvs" if openpai else "env", {})[key] = value
    if args.param and not args.notebook:
        raise BadRequest("-p/--param sets a notebook's parameters; add --notebook PATH.ipynb", field="notebook")
    if args.notebook:
        _apply_notebook(spec, args, command, openpai)
    if getattr(args, "no_image", False):
        if args.image is not None:
            raise BadRequest("--image and --no-image contradict each other; keep one", field="image")
        spec.pop("image", None)  # the commands run as processes, in this environment (the client sends it)
    if not openpai and not spec.get("command") and not spec.get("notebook") \
            and not any(t.get("command") for t in spec["tasks"]):
        raise BadRequest("no command: give -c 'python train.py', put it after --, or set command in the spec",
                         field="command")
    return spec


def _apply_notebook(spec: dict, args, command: str | None, openpai: bool) -> None:
    """``--notebook PATH -p NAME=VALUE``: the notebook staged and run by the server's notebook runner."""
    from ..submission import notebook_job_spec, parse_parameters

    if openpai or command:
        raise BadRequest("--notebook runs the notebook itself; drop " + ("the OpenPAI spec" if openpai else "the command"),
                         field="notebook")
    nb = notebook_job_spec(args.notebook, parse_parameters(args.param))
    spec.setdefault("name", nb["name"])
    spec["files"] = {**(spec.get("files") or {}), **nb["files"]}
    spec["notebook"] = nb["notebook"]


def _refuse_server_options_in_command(words: list[str], args) -> None:
    """``hive-lab submit -- python x.py --url U --token T``: those belong to the command, and hive-lab
    would quietly talk to the server it finds by itself with that server's token. Say so instead."""
    for option in ("--url", "--token"):
        if getattr(args, option[2:]) is None and any(w == option or w.startswith(option + "=") for w in words):
            raise BadRequest(
                f"{option} comes after `--`, so it would be part of the job's command and hive-lab would use "
                f"the server it finds by itself; put {option} before `--` (hive-lab submit {option} ... -- COMMAND), "
                f"or give a command that takes {option} itself with -c '...'", field=option[2:])




def _foreign_file(args):
    """(text, content type) when SPEC is another platform's job file (sent as it is), else None."""
    from ..submission import read_job_file

    words = list(args.words)
    if not words or not words[0].endswith(SPEC_SUFFIXES + (".sh", ".sbatch", ".slurm", ".bash")):
        return None
    path = words[0]
    text, ctype, foreign = read_job_file(path)
    if not foreign:
        return None
    extra = [w for w in words[1:] if w != "--"]
    flags = [name for name, value in vars(args).items()
             if name in ("name", "vc", "gpus", "gpu_memory_mb", "gpu_type", "tasks", "cpus", "memory_mb", "priority",
                         "image", "max_retries", "working_dir", "command", "time_limit", "notebook") and value is not None]
    if extra or flags or args.env or args.file or args.param or args.after:
        what = "--" + flags[0].replace("_", "-") if flags else "--env" if args.env else "--file" if args.file else \
            "--after" if args.after else "a command"
        hint = ("; to run its commands as processes on a server without containers, keep the file's image and "
                "add --no-image" if flags and flags[0] == "image" else "")
        raise BadRequest(f"{path} is another platform's job file, sent as it is; {what} does not apply to it "
                         f"(edit the file instead{hint})")
    return text, ctype


@reports_errors
def run(args) -> int:
    from ..format import FINISHED, status_line

    document = _foreign_file(args)
    if document is not None:
        return _run_document(args, client_from(args), *document)
    spec = build_spec(args)
    client = client_from(args)
    if args.after:  # hive_lab/dependencies.py: ids or names of your jobs, each with what it must do
        from ..dependencies import depends_on, resolver

        spec["depends_on"] = list(spec.get("depends_on") or []) + depends_on(args.after, resolver(client))
    if not spec.get("vc") and "taskRoles" not in spec:
        vcs = client.me().get("vcs") or []
        if vcs:
            spec["vc"] = vcs[0]
    from ..sweeps import array_fields

    fields = array_fields(args.array, args.sweep)
    if fields:
        return _run_array(args, client, spec, fields)
    if args.dry_run:
        from ..format import what_if_text

        answer = client.what_if(spec)
        if args.json:
            print_json(answer)
        else:
            print(what_if_text(answer))
        return 0
    job = client.submit(spec)
    if not (args.wait or args.follow):
        if args.json:
            print_json(job)
        else:
            print(status_line(job))
        return 0
    job = wait_with_progress(client, job, follow=args.follow, quiet=args.json)
    if args.json:
        print_json(job)
    if job.get("state") == "succeeded":
        return 0
    code = job.get("exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else 1 if job.get("state") in FINISHED else 0


def _run_array(args, client, spec: dict, fields: dict) -> int:
    """``--array`` / ``--sweep``: one request makes the array; ``--wait`` waits until every element ended."""
    from ..format import array_line

    if args.dry_run:
        raise BadRequest("--dry-run answers for one job; drop --array/--sweep to ask about one element",
                         field="dry_run")
    if args.follow:
        raise BadRequest("--follow streams one job's log; with --array use --wait, then hive-lab logs ELEMENT",
                         field="follow")
    array = client.submit_array(spec, **fields)
    if args.wait:
        from ..watch import wait_for_array

        array = wait_for_array(client, array["id"])
    print_json(array) if args.json else print(array_line(array))
    if args.wait:
        bad = sum(array["counts"].get(s, 0) for s in ("failed", "cancelled"))
        return 1 if bad else 0
    return 0


def _run_document(args, client, text: str, ctype: str) -> int:
    from ..format import FINISHED, status_line, what_if_text

    if args.dry_run:
        answer = client.submit_file(text, ctype, dry_run=True, no_image=args.no_image)
        print_json(answer) if args.json else print(what_if_text(answer))
        return 0
    job = client.submit_file(text, ctype, no_image=args.no_image)
    if str(job.get("id", "")).startswith("a-"):  # an array (#SBATCH --array, an OpenPAI role without gang)
        return _document_array(args, client, job)
    if not args.json:
        print(status_line(job))
        for note in ((job.get("spec") or {}).get("source") or {}).get("not_applied", []):
            print(f"  not applied: {note}", file=sys.stderr)
    if args.wait or args.follow:
        job = wait_with_progress(client, job, follow=args.follow, quiet=args.json)
    if args.json:
        print_json(job)
    if not (args.wait or args.follow) or job.get("state") == "succeeded":
        return 0
    code = job.get("exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else 1 if job.get("state") in FINISHED else 0


def _document_array(args, client, array: dict) -> int:
    """A job file that became an array: its line (and what was not applied); with --wait, once it ended."""
    from ..format import array_line

    if not args.json:
        print(array_line(array))
        for note in ((array.get("spec") or {}).get("source") or {}).get("not_applied", []):
            print(f"  not applied: {note}", file=sys.stderr)
    if args.wait or args.follow:
        from ..watch import wait_for_array

        array = wait_for_array(client, array["id"])
        if not args.json:
            print(array_line(array))
    if args.json:
        print_json(array)
    if not (args.wait or args.follow):
        return 0
    return 1 if array["counts"].get("failed") else 0


def wait_with_progress(client, job: dict, *, follow: bool, quiet: bool = False) -> dict:
    """Wait until the job ends. Status lines go to stderr as plain lines, one per change (a spinner
    shows the current one on a terminal), the final one once; the job's log goes to stdout: as it is
    written with ``follow``, else all of it once the job has ended."""
    from rich.console import Console

    from ..format import FINISHED, status_line
    from ..watch import watch_job

    console = Console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)
    printed = {"key": None}

    def say(info: dict) -> None:
        key = (info.get("state"), info.get("reason"))
        if key != printed["key"]:
            printed["key"] = key
            console.print(status_line(info), markup=False)

    def on_log(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    say(job)
    with console.status(status_line(job)) as status:
        def on_status(info: dict) -> None:
            status.update(status_line(info))
            if info.get("state") not in FINISHED:
                say(info)

        final = watch_job(client, job["id"], on_status=on_status, on_log=on_log if follow else None)
    if not follow and not quiet:
        write_log(client, final["id"], sys.stdout)
    say(final)
    return final


def write_log(client, job_id: str, out) -> None:
    """The job's whole log (every task's, each under a header when there are several)."""
    from ..errors import NotFound

    try:
        first = client.logs(job_id)
    except NotFound:
        return  # it never started
    tasks = first.get("tasks") or [first.get("task")]
    for task in tasks:
        text = client.log_text(job_id, task=task)
        if len(tasks) > 1:
            out.write(f"==> {task} <==\n")
        out.write(text if not text or text.endswith("\n") else text + "\n")
    out.flush()
