"""IPython magics: ``%%submit``, ``%hive_jobs``, ``%hive_cancel``, ``%hive_pause``, ``%hive_resume``,
``%hive_migrate``, ``%hive_resize``, ``%hive_status``, ``%hive_connect``."""

from __future__ import annotations

import os
import sys
import threading

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .arrays import JobArray
from .errors import BadRequest, HiveLabError
from .format import FINISHED, array_line, status_line
from .job import Job
from .submission import cell_name, cell_spec, collect_files, notebook_job_spec, parse_parameters
from .sweeps import array_fields
from .watch import watch_job


def _in_kernel(shell) -> bool:
    """True in a Jupyter kernel (widgets render); False in terminal IPython (print lines)."""
    from .widgets.job_monitor import in_kernel

    return in_kernel(shell)


def _gpus_arg(text: str):
    import argparse

    from .submission import parse_gpus
    try:
        return parse_gpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@magics_class
class HiveLabMagics(Magics):
    def __init__(self, shell=None, client=None):
        super().__init__(shell)
        self._client = client
        self.watchers: dict[str, threading.Thread] = {}

    @property
    def client(self):
        if self._client is None:
            from .client import Client

            self._client = Client()
        return self._client

    @client.setter
    def client(self, value) -> None:
        self._client = value

    # ---------------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--gpus", type=_gpus_arg, default=0,
              help="GPUs per task (default 0), or a share of one GPU: 0.5, 0.25, 0.125")
    @argument("--gpu-type", default=None, help="GPU type, e.g. A100 (default: any your VC has)")
    @argument("--vc", default=None, help="virtual cluster (default: your first)")
    @argument("--priority", default=None, help="0..1000 or 'opportunistic'")
    @argument("--image", default=None, help="container image (default: run locally)")
    @argument("--no-image", action="store_true",
              help="with --file, on a server without containers: run the commands of a job file that names an "
                   "image as processes (the job lists image as not applied)")
    @argument("--name", default=None,
              help="job name (default: the cell's first comment, else the notebook's name)")
    @argument("--files", nargs="+", default=None, help="files, globs or directories to stage (comma or space separated)")
    @argument("--file", default=None, metavar="PATH",
              help="submit this job file as it is (hive-lab's spec, an OpenPAI job, an sbatch script, a "
                   "Kubernetes/Volcano manifest) instead of the cell: %%submit --file PATH over a cell of "
                   "comments only, or the line magic %submit --file PATH")
    @argument("--notebook", default=None, metavar="PATH.ipynb",
              help="run this notebook as the job (the line magic %submit --notebook PATH): papermill executes "
                   "it, its executed copy becomes an output of the job")
    @argument("-p", "--param", nargs="+", default=None, metavar="NAME=VALUE",
              help="with --notebook: parameters set after the notebook's cell tagged 'parameters'")
    @argument("--tasks", type=int, default=1, help="number of tasks (gang-scheduled)")
    @argument("--env", nargs="+", default=None, help="KEY=VALUE environment variables")
    @argument("--time-limit", default=None,
              help="run time limit, e.g. 2h, 90m, 1h30m or seconds (default: the VC's); the job fails at it")
    @argument("--array", default=None, metavar="INDICES[%N]",
              help="a job array: one element per index, e.g. 0-49%%8 (HIVE_ARRAY_INDEX; docs/arrays.md)")
    @argument("--sweep", action="append", default=None, metavar="NAME=V1,V2",
              help="a parameter sweep, repeatable: --sweep lr=0.1,0.01 --sweep bs=32,64 (HIVE_PARAM_<NAME>)")
    @argument("--after", action="append", default=None, metavar="JOB[:WHEN]",
              help="start only after JOB ended as WHEN (ok: the default, failed, or ended); JOB is a job id, a "
                   "variable holding a Job, or the name of your newest job so named; repeatable or comma-separated")
    @argument("--cron", default=None, metavar="EXPR",
              help="run this cell as a recurring job instead: at each time the cron expression names, e.g. "
                   "'0 0 * * *' (returns the schedule, one line; running the cell again replaces it: a schedule is "
                   "named after --name, else the notebook and cell; docs/pipelines.md)")
    @argument("--tz", default="UTC", help="with --cron: the IANA time zone, e.g. Europe/Berlin (default UTC)")
    @argument("--policy", default="skip", choices=("skip", "queue_one", "run_all"),
              help="with --cron: what to do when a run is still going or was missed")
    @argument("--dry-run", action="store_true",
              help="only say what would happen now (start on which GPUs, or wait and why); submit nothing")
    @argument("--compare", type=int, nargs="+", default=None, metavar="GPUS",
              help="with --dry-run: also ask for these GPU counts per task, side by side (e.g. --gpus 2 --compare 4)")
    @argument("--wait", action="store_true", help="block until the job has finished")
    @argument("--follow", action="store_true", help="block and stream the log")
    @line_cell_magic
    def submit(self, line, cell=None):
        """Run this cell's code as a hive-lab batch job and return its ``Job`` handle.

        The code (and ``--files``) is staged into the job's working dir and run with a fresh Python
        in the job's image (or locally). Write results to ``$HIVE_OUTPUT_DIR`` and fetch them with
        ``job.outputs()`` / ``job.download()``.
        """
        args = parse_argstring(self.submit, line)
        if args.file:  # %submit --file PATH (or %%submit --file PATH over a cell of comments)
            return self._submit_file(args, cell or "")
        if cell is None and not args.notebook:
            raise UsageError("%submit (one %) sends a job file or a notebook: %submit --file PATH, "
                             "%submit --notebook PATH.ipynb; to run a cell, use %%submit")
        try:
            env = _parse_env(args.env)
            files = collect_files(args.files) if args.files else {}
            # no --name: the cell's first comment, else this notebook's name (JPY_SESSION_NAME: the server sets it)
            name = args.name or (None if args.notebook else cell_name(cell or "", os.environ.get("JPY_SESSION_NAME")))
            options = dict(gpus=args.gpus, gpu_type=args.gpu_type, vc=args.vc, priority=args.priority,
                           image=args.image, name=name, tasks=args.tasks, files=files, env=env,
                           time_limit=args.time_limit)
            if args.param and not args.notebook:
                raise BadRequest("-p/--param sets a notebook's parameters; add --notebook PATH.ipynb",
                                 field="notebook")
            if args.notebook:
                if cell is not None and any(ln.strip() and not ln.lstrip().startswith("#") for ln in cell.splitlines()):
                    raise BadRequest("--notebook runs the notebook, not the cell; leave the cell empty (comments "
                                     "only) or use the line magic %submit --notebook PATH")
                spec = notebook_job_spec(args.notebook, parse_parameters(args.param), **options)
            else:
                spec = cell_spec(cell, **options)
            if "vc" not in spec:
                vcs = self.client.me().get("vcs") or []
                if vcs:
                    spec["vc"] = vcs[0]
            if args.after:  # hive_lab/dependencies.py
                from .dependencies import depends_on, resolver

                spec["depends_on"] = depends_on(args.after, resolver(self.client, self.shell.user_ns if self.shell else None))
            if args.cron:  # a recurring job: its runs are this spec, submitted as you (pipelines/schedules.py)
                if args.array or args.sweep or args.after or args.dry_run or args.wait or args.follow:
                    raise BadRequest("--cron makes a schedule of this cell; --array, --sweep, --after, --dry-run, "
                                     "--wait and --follow are for one submit", field="cron")
                from .schedule_handle import Schedule, cell_schedule_name

                cron = args.cron.strip()
                if len(cron) > 1 and cron[0] == cron[-1] and cron[0] in "'\"":  # IPython keeps the quotes
                    cron = cron[1:-1]
                # named after --name, else this notebook and cell: running the cell again replaces its schedule
                name = args.name or cell_schedule_name(self.shell, cell or "")
                schedule = self.client.add_schedule(cron, spec, name=name, timezone=args.tz, policy=args.policy)
                return Schedule(self.client, schedule)  # shown as one line: what, when in its zone, next run
            fields = array_fields(args.array, args.sweep)
            if fields:  # one request makes the array; its handle is returned (hive_lab.arrays.JobArray)
                if args.dry_run or args.wait or args.follow:
                    raise BadRequest("--dry-run/--wait/--follow are for one job; with --array or --sweep use "
                                     "the returned array's .wait() and .results()")
                array = JobArray(self.client, self.client.submit_array(spec, **fields))
                if _in_kernel(self.shell):  # the result is its live display (JobArray._ipython_display_)
                    from .widgets.array_results import ArrayMonitor, follow_array_in_background

                    array.monitor = ArrayMonitor(self.client, array.info)
                    self.watchers[array.id] = array.watcher = follow_array_in_background(array, array.monitor)
                else:
                    print(array_line(array.info))
                return array
            if args.dry_run:  # printed, so the answer stays in the saved notebook; nothing is submitted
                return self._what_if(spec, args.compare or [])
            job = Job(self.client, self.client.submit(spec))
        except HiveLabError as exc:
            return self._fail(exc)
        try:
            self._show(job, block=args.wait or args.follow, follow=args.follow)
        except KeyboardInterrupt:
            print(f"stopped waiting; {job.id} keeps going (job.cancel() or %hive_cancel {job.id} stops it)",
                  file=sys.stderr)
        return job

    def _submit_file(self, args, cell: str):
        """``%%submit --file PATH``: the file goes to the server as it is (docs/formats.md)."""
        from .errors import BadRequest
        from .format import what_if_text
        from .submission import read_job_file

        try:
            if any(ln.strip() and not ln.lstrip().startswith("#") for ln in cell.splitlines()):
                raise BadRequest("%%submit --file sends the file as it is; leave the cell empty (comments only) "
                                 "or drop --file")
            text, ctype, _ = read_job_file(args.file)
            if args.dry_run:
                print(what_if_text(self.client.submit_file(text, ctype, dry_run=True, no_image=args.no_image)))
                return None
            job = Job(self.client, self.client.submit_file(text, ctype, no_image=args.no_image))
        except HiveLabError as exc:
            return self._fail(exc)
        self._show(job, block=args.wait or args.follow, follow=args.follow)
        return job

    def _what_if(self, spec: dict, compare: list[int]) -> None:
        """Print what would happen now for ``spec`` (and for each GPU count in ``compare``, side by side
        as a table when there are several). Plain output: it stays in the saved notebook."""
        from .format import what_if_text

        from .errors import BadRequest

        answers = [self.client.what_if(spec)]
        for gpus in compare:
            variant = dict(spec, tasks=[dict(spec["tasks"][0], gpus=gpus)] + list(spec["tasks"][1:]))
            try:
                answers.append(self.client.what_if(variant))
            except BadRequest as exc:  # this shape can never run: say so in its column
                answers.append({"gpus": gpus * spec["tasks"][0].get("count", 1), "outcome": "refused",
                                "reason": str(exc)})
        if len(answers) == 1:
            print(what_if_text(answers[0]))
            return None
        from .tables import print_table, what_if_table

        print_table(what_if_table(answers))
        return None

    def _show(self, job: Job, *, block: bool, follow: bool) -> None:
        """What the cell shows. What stays in the saved notebook is ordinary output: the job's log
        (its tail with ``--wait``, all of it with ``--follow``) as a stream, and the returned ``Job`` as
        the cell's result with the final state and exit code. In a kernel a live display (status line
        and log tail, updated in place) is shown while waiting; without ``--wait`` the cell's result
        is that live display and it follows the job until it ends."""
        from .format import LogTail
        from .widgets.job_monitor import JobMonitor, follow_in_background, in_kernel

        client = self.client
        kernel = in_kernel(self.shell)
        monitor = JobMonitor(show_log=not follow)
        monitor.update(job.info)
        if not block:
            if kernel:
                job.monitor = monitor  # shown as the cell's result (Job._ipython_display_)
                self.watchers[job.id] = job.watcher = follow_in_background(job, monitor)
            else:
                print(status_line(job.info), flush=True)
            return
        tail = monitor.tail  # the log tail printed at the end (--wait)

        def on_status(info: dict) -> None:
            if not kernel and (info.get("state"), info.get("reason")) != (job.info.get("state"), job.info.get("reason")) \
                    and info.get("state") not in FINISHED:
                print(status_line(info), flush=True)
            job.info = info
            monitor.update(info)

        def print_log(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        if kernel:
            monitor.show()
        else:
            print(status_line(job.info), flush=True)
        try:
            final = watch_job(client, job.id, on_status=on_status,
                              on_log=print_log if follow else monitor.append_log)
        except KeyboardInterrupt:
            if kernel:  # the live display keeps following the job
                job.monitor = monitor
                self.watchers[job.id] = job.watcher = follow_in_background(job, monitor)
            raise
        job.info = final
        monitor.clear()
        if not follow:
            _print_tail(tail)
        if not kernel:
            print(status_line(final), flush=True)

    # ---------------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--all", action="store_true", help="everyone's jobs, not only mine")
    @argument("--state", default=None, help="comma-separated states, e.g. queued,running")
    @argument("--vc", default=None)
    @argument("--limit", type=int, default=50)
    @line_magic
    def hive_jobs(self, line):
        """List my jobs (``--all``: everyone's), newest first."""
        args = parse_argstring(self.hive_jobs, line)
        states = args.state.split(",") if args.state else None
        if _in_kernel(self.shell):
            from IPython.display import display

            from .widgets.queue import QueueView

            try:
                view = QueueView(self.client, all_users=args.all, states=states, vc=args.vc, max_rows=args.limit)
            except HiveLabError as exc:
                return self._fail(exc)
            if view.error:
                return self._fail(HiveLabError(view.error))
            display(view)
            return None
        try:
            jobs = self.client.jobs(user=None if args.all else "me", vc=args.vc, state=states, limit=args.limit,
                                    elements=False)
            arrays = [] if states or args.vc else self.client.arrays(limit=args.limit).get("arrays", [])
        except HiveLabError as exc:
            return self._fail(exc)
        else:
            from .tables import jobs_table, print_table

            for a in arrays:  # an array is one line; its elements are left out of the table
                print(array_line(a))
            print_table(jobs_table(jobs, title=f"{'all' if args.all else 'my'} jobs"))
        return None

    @line_magic
    def hive_cancel(self, line):
        """Cancel jobs by id: ``%hive_cancel j-000017 [j-000018 ...]``; an array id (a-...) cancels its
        elements not ended, ``a-000001[3,5-7]`` some of them."""
        from .cli.cancel import ARRAY

        ids = line.split()
        if not ids:
            print("usage: %hive_cancel JOB_ID [JOB_ID ...]", file=sys.stderr)
            return None
        for job_id in ids:
            try:
                array = ARRAY.match(job_id)
                if array:
                    print(array_line(self.client.cancel_array(array.group(1), indices=array.group(2))))
                    continue
                print(status_line(self.client.cancel(job_id)))
            except HiveLabError as exc:
                print(f"hive-lab: {exc}", file=sys.stderr)
        return None

    # pause / resume / migrate / resize (docs/checkpoint.md): like %hive_cancel, one status line per job,
    # and the server's sentence on stderr for each job it refuses (403 others' jobs, 409 not now, 400 bad input)
    @magic_arguments()
    @argument("jobs", nargs="+", metavar="JOB")
    @argument("--reason", default="", help="said in the job's history")
    @line_magic
    def hive_pause(self, line):
        """Pause jobs: ``%hive_pause j-000017 [...] [--reason TEXT]``. A running job gets the checkpoint
        signal and stops; a paused job holds no GPU and waits for ``%hive_resume``."""
        args = parse_argstring(self.hive_pause, line)
        self._act(args.jobs, lambda job_id: self.client.pause(job_id, args.reason))

    @magic_arguments()
    @argument("jobs", nargs="+", metavar="JOB")
    @argument("--reason", default="", help="said in the job's history")
    @line_magic
    def hive_resume(self, line):
        """Queue paused jobs again: ``%hive_resume j-000017 [...]``; they start with ``HIVE_RESUMED=1``."""
        args = parse_argstring(self.hive_resume, line)
        self._act(args.jobs, lambda job_id: self.client.resume(job_id, args.reason))

    @magic_arguments()
    @argument("jobs", nargs="+", metavar="JOB")
    @argument("--gpu-type", required=True, help="the GPU type to move to, e.g. V100")
    @argument("--reason", default="", help="said in the job's history")
    @line_magic
    def hive_migrate(self, line):
        """Admins: move jobs to another GPU type: ``%hive_migrate j-000017 --gpu-type V100``."""
        args = parse_argstring(self.hive_migrate, line)
        self._act(args.jobs, lambda job_id: self.client.migrate(job_id, args.gpu_type, args.reason))

    @magic_arguments()
    @argument("job", metavar="JOB")
    @argument("--gpus", type=int, required=True, help="the new GPU count, within the job's min_gpus..max_gpus")
    @argument("--reason", default="", help="said in the job's history")
    @line_magic
    def hive_resize(self, line):
        """Admins: give an elastic job another GPU count: ``%hive_resize j-000017 --gpus 2``."""
        args = parse_argstring(self.hive_resize, line)
        self._act([args.job], lambda job_id: self.client.resize(job_id, args.gpus, args.reason))

    def _act(self, ids, do) -> None:
        for job_id in ids:
            try:
                print(status_line(do(job_id)))
            except HiveLabError as exc:
                print(f"hive-lab: {job_id}: {exc}", file=sys.stderr)

    @line_magic
    def hive_status(self, line):
        """The live dashboard: cluster, VC usage, topology heatmap and queue."""
        try:
            if _in_kernel(self.shell):
                from IPython.display import display

                from .widgets.dashboard import Dashboard

                display(Dashboard(self.client))
            else:
                from .tables import print_overview

                print_overview(self.client)
        except HiveLabError as exc:
            return self._fail(exc)
        return None

    @magic_arguments()
    @argument("url", nargs="?", default=None, help="the Jupyter server's URL (default: discover)")
    @argument("--token", default=None)
    @line_magic
    def hive_connect(self, line):
        """Choose the server explicitly: ``%hive_connect http://host:8888/ --token T``."""
        from .client import Client

        args = parse_argstring(self.hive_connect, line)
        try:
            self.client = Client(args.url, args.token)
            me = self.client.me()
        except HiveLabError as exc:
            return self._fail(exc)
        print(f"connected to {self.client.base_url} as {me.get('user')} (VCs: {', '.join(me.get('vcs') or [])})")
        return None

    def _fail(self, exc: HiveLabError):
        """Show the server's sentence as the cell's error, without a long traceback (``UsageError``
        stops "run all" like any failing cell; ``__cause__`` keeps the ``HiveLabError``)."""
        raise UsageError(f"hive-lab: {exc}") from exc


def _print_tail(tail) -> None:
    """The job's log tail as the cell's ordinary stdout (saved with the notebook)."""
    if tail.dropped:
        print(f"[hive-lab: {tail.dropped} earlier line{'s' if tail.dropped != 1 else ''} of the log not shown; "
              "job.logs() has it all]")
    text = tail.text
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _parse_env(items) -> dict[str, str]:
    env = {}
    for item in items or []:
        if "=" not in item:
            raise HiveLabError(f"--env takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        env[key] = value
    return env


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(HiveLabMagics(ipython))
