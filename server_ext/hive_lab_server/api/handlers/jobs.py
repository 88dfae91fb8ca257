"""jobs, jobs/{id}, jobs/{id}/logs, jobs/{id}/outputs[/{path}]."""

from __future__ import annotations

import asyncio
import mimetypes
import os
import pathlib

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from hive_lab_server.wire import models
from hive_lab_server.execution.isolation.job_files import UnsafePath, list_outputs, open_output, read_log
from hive_lab_server.wire.job_state import STATE_NAMES
from hive_lab_server.jobs.lifecycle import launch_plan
from hive_lab_server.execution.launchers.base import UnsupportedSpec
from hive_lab_server.jobs.service import ServiceError, task_names
from hive_lab_server.api import formats
from hive_lab_server.execution.secrets import seal
from hive_lab_server.wire.spec import SpecError
from hive_lab_server.api.handlers.array_submit import submit_array
from hive_lab_server.jobs.submit_checks import checked_submission
from hive_lab_server.api.handlers import query
from hive_lab_server.api.handlers.base import MAX_JSON_DEPTH, HiveError, HiveHandler, json_depth


class JobsHandler(HiveHandler):
    require_array = False  # POST arrays: the body must have array or sweep
    array_fields: dict = {}

    @web.authenticated
    @authorized
    def get(self) -> None:
        caller = self.caller()
        users = query.users(self, caller.user)
        vcs = query.names(self, "vc", "VC names")
        states = query.names(self, "state", "job states")
        bad = [s for s in states if s not in STATE_NAMES]
        if bad:
            raise HiveError(400, f"query parameter state: unknown state {bad[0]!r}; use any of {', '.join(STATE_NAMES)}", "state")
        limit, offset, after = query.page(self, 50, 1000)
        elements = query.flag(self, "elements", True)  # false: no elements of job arrays
        self.reply_model(models.JobList, self.service.list_jobs(users=users, vcs=vcs, states=states, limit=limit,
                                                                offset=offset, private_for=caller.sees_private,
                                                                elements=elements, after=after))

    def job_spec(self):
        """The body as a JobSpec: hive-lab's JSON, or an OpenPAI job (v1 JSON, v2 YAML), a Kubernetes or
        Volcano manifest (YAML/JSON), an sbatch script (text/plain) as ``formats`` reads them."""
        no_image = query.flag(self, "no_image")
        if no_image and self.service.launcher.supports_images:
            raise HiveError(400, f"no_image: this server's {self.service.launcher.name} launcher runs jobs in their "
                                 "images; submit the file without --no-image", "no_image")
        try:
            doc = formats.read_body(self.request.body or b"", self.request.headers.get("Content-Type"))
            if json_depth(doc) > MAX_JSON_DEPTH:
                raise HiveError(400, f"the body is nested too deeply; keep nesting under {MAX_JSON_DEPTH} levels")
            # a job array / sweep: the fields that make many elements of one spec (wire/array_spec.py)
            self.array_fields = {k: doc.pop(k) for k in ("array", "sweep") if k in doc} if isinstance(doc, dict) else {}
            # no_image (--no-image): a file naming an image runs its commands as processes on a server
            # without containers; the image is listed in the job as not applied
            spec = formats.from_document(doc, seal=lambda values: seal(values, self.service.jobs_root),
                                         ignore_image=no_image)
            platform_array = spec.source.runtime.get("array") if spec.source is not None else None
            if platform_array and not self.array_fields:  # e.g. #SBATCH --array=0-9%2
                self.array_fields = {"array": platform_array}
            return spec
        except RecursionError:
            raise HiveError(400, f"the body is nested too deeply; keep nesting under {MAX_JSON_DEPTH} levels") from None
        except SpecError as exc:
            raise HiveError(400, exc.message, exc.field) from None

    @web.authenticated
    @authorized
    async def post(self) -> None:
        caller = self.caller()
        spec = self.job_spec()
        try:  # the same checks a recurring job's runs pass (submit_checks.py)
            spec, vc = checked_submission(service=self.service, access=self.hive.access, caller=caller, spec=spec)
        except ServiceError as exc:
            raise HiveError(exc.status, exc.message, exc.field) from None
        if self.array_fields or self.require_array:  # many elements of this spec (handlers/arrays.py)
            await submit_array(self, spec, caller, vc)
            return
        if query.flag(self, "dry_run"):  # what would happen now; nothing is stored, launched or preempted
            try:
                answer = self.admission.what_if(spec, caller.user, vc, caller.groups)
            except ServiceError as exc:
                raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None
            self.reply_model(models.WhatIf, answer, 200)
            return
        try:  # committed together with the submits arriving at the same time (group commit)
            job = await self.admission.submit_grouped(spec, caller.user, vc, caller.groups,
                                                    self.hive.access.fair_share_group(caller, vc))
        except ServiceError as exc:
            raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None
        self.set_header("Location", self.request.path.rstrip("/") + "/" + job["id"])
        self.reply_model(models.Job, job, 201)


class JobHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self, job_id: str) -> None:
        row = self.job_row(job_id)
        self.reply_model(models.Job, self.service.job_object(job_id, detail=True, private=self.caller().sees_private(row),
                                                             row=row))

    @web.authenticated
    @authorized
    async def delete(self, job_id: str) -> None:
        row = self.job_row(job_id)
        caller = self.caller()
        if not caller.sees_private(row):
            raise HiveError(403, f"user {caller.user} may not cancel job {job_id} (it belongs to {row['user']})")
        try:
            note = (query.text(self, "reason", "say why in a few words", "") or "").strip()[:300]  # e.g. a culled kernel
            by = f"{caller.user} ({note})" if note else caller.user
            job = await self.service.cancel(job_id, by, wait_s=self.hive.cancel_wait_s)
        except Exception as exc:
            from hive_lab_server.jobs.service import ServiceError

            if isinstance(exc, ServiceError):
                raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None
            raise
        self.reply_model(models.Job, job)


class _OwnedJob(HiveHandler):
    def owned_row(self, job_id: str, what: str) -> dict:
        row = self.job_row(job_id)
        caller = self.caller()
        if not caller.sees_private(row):
            raise HiveError(403, f"user {caller.user} may not read the {what} of job {job_id} (it belongs to {row['user']})")
        return row


class JobLogsHandler(_OwnedJob):
    @web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        row = self.owned_row(job_id, "logs")
        tasks = task_names(row["spec"])
        task = query.text(self, "task", f"give a task name ({', '.join(tasks)})", tasks[0])
        if task not in tasks:
            raise HiveError(400, f"query parameter task: job {job_id} has no task {task!r}; its tasks are {', '.join(tasks)}", "task")
        offset = query.integer(self, "offset", 0, 0)
        follow = query.flag(self, "follow")  # follow=AAA: a 400, not "no"
        path = launch_plan.log_path(self.service.jobs_root, job_id, task)
        user = row["user"]
        if not follow:
            data, next_offset, size = read_log(self.service, user, path, offset)
            eof = not self.service.task_active(job_id, task) and next_offset >= size
            self.reply_model(models.LogChunk, {"task": task, "tasks": tasks, "offset": offset, "next_offset": next_offset,
                                               "data": data.decode("utf-8", "replace"), "eof": eof})
            return
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("X-Accel-Buffering", "no")
        self.set_header("Cache-Control", "no-cache")
        pos = offset
        try:
            while True:
                active = self.service.task_active(job_id, task)
                data, pos, _ = read_log(self.service, user, path, pos)
                if data:
                    self.write(data)
                    await self.flush()
                    continue
                if not active:
                    break
                await asyncio.sleep(0.2)
        except StreamClosedError:
            return
        self.finish(set_content_type="text/plain; charset=utf-8")


class JobOutputsHandler(_OwnedJob):
    @web.authenticated
    @authorized
    def get(self, job_id: str) -> None:
        row = self.owned_row(job_id, "outputs")
        self.reply_model(models.OutputList, {"files": list_outputs(self.service, row["user"], row["output_dir"])})


class JobOutputFileHandler(_OwnedJob):
    @web.authenticated
    @authorized
    async def get(self, job_id: str, path: str) -> None:
        row = self.owned_row(job_id, "outputs")
        if "\x00" in path:  # no file name holds one (and the OS calls below refuse it)
            raise HiveError(400, f"output path {path!r} contains a NUL character; see jobs/{job_id}/outputs for the names", "path")
        try:  # no symlink followed, no hard link served (isolation.job_files)
            fd, _ = open_output(self.service, row["user"], row["output_dir"], path)
        except UnsafePath as exc:
            raise HiveError(403, f"job {job_id}: output {path!r} is not served: {exc}") from None
        except OSError:
            raise HiveError(404, f"job {job_id} has no output file {path!r}; see jobs/{job_id}/outputs") from None
        name = pathlib.PurePosixPath(path).name
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        with os.fdopen(fd, "rb") as f:
            while chunk := f.read(1 << 20):
                self.write(chunk)
                await self.flush()
        self.finish(set_content_type=ctype)
