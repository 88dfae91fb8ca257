"""Job specs as users send them (native hive-lab form or OpenPAI form), validated with pydantic.

``parse_job_spec(body)`` returns a ``JobSpec`` or raises ``SpecError`` whose ``field`` names the
offending field (``tasks[0].gpus``, ``taskRoles[1].gpuNumber``) and whose message says what to change.
"""

from __future__ import annotations

import functools
import keyword
import typing
import posixpath
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hive_lab_server.wire.notebook_run import notebook_command
from hive_lab_server.wire.depends_spec import DependsOn, fold_after

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV_PREFIXES = ("HIVE_",)
RESERVED_ENV = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}
# what never travels from a submitter's environment into a job: tokens and the server's own variables
NEVER_INHERITED_ENV = {"JUPYTER_TOKEN", "JPY_API_TOKEN", "JPY_SESSION_NAME", "PWD", "OLDPWD", "SHLVL", "_"}
NEVER_INHERITED_PREFIXES = ("JUPYTERHUB_", "JUPYTER_", "JPY_", "KERNEL_", "PYDEVD_", "HIVE_LAB_")
MAX_FILES_BYTES = 1 << 20
# the service makes these in the working dir: a staged file may not take their place
RESERVED_PATHS = {"output", "checkpoint"}  # the job's output dir (HIVE_OUTPUT_DIR) and HIVE_CHECKPOINT_DIR
RESERVED_DIRS = {"logs"}  # the tasks' log files; nothing may be staged there
MAX_TASKS = 1024
GPU_SHARES = (0.5, 0.25, 0.125)  # a share of one GPU (halves down to eighths; hive_scheduler.shares)
GPU_SHARE_HELP = "a whole number of GPUs (0, 1, 2, ...) or a share of one GPU: 0.5, 0.25 or 0.125"


def check_gpus(value: Any) -> int | float:
    """``gpus`` as the core takes it: an int >= 0, or one of GPU_SHARES (a float); ValueError says what is allowed."""
    if isinstance(value, bool):
        raise ValueError(f"must be {GPU_SHARE_HELP}")
    if isinstance(value, int):
        if value < 0 or value > 1024:
            raise ValueError(f"must be {GPU_SHARE_HELP}")
        return value
    if isinstance(value, float):
        if value.is_integer() and 0 <= value <= 1024:
            return int(value)
        if value in GPU_SHARES:
            return value
    raise ValueError(f"must be {GPU_SHARE_HELP}")


def is_share(gpus: Any) -> bool:
    return isinstance(gpus, float) and gpus in GPU_SHARES


class SpecError(ValueError):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


OPPORTUNISTIC_MAX_RETRIES = 10  # an opportunistic job's max_retries when its spec gives none


def _takes_int(annotation: Any) -> bool:
    """The field takes an int and no float (``int``, ``Annotated[int, ...] | None``, an int or a literal)."""
    args = typing.get_args(annotation)
    if annotation is int:
        return True
    if annotation is float or not args:
        return False
    if typing.get_origin(annotation) is Annotated:
        return _takes_int(args[0])
    return any(_takes_int(a) for a in args) and not any(a is float for a in args)


@functools.cache
def _int_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` that take an int and no float: read off its annotations once per model (walked
    for every submit, they were ~15 % of the server's CPU per submit in bench_server's closed loop)."""
    return frozenset(name for name, field in model.model_fields.items() if _takes_int(field.annotation))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        """JSON Schema's integer includes 6029.0 (the OpenAPI document allows it); "6029" and 6029.5 stay refused."""
        if not isinstance(data, dict):
            return data
        ints = _int_fields(cls)
        return {k: int(v) if k in ints and isinstance(v, float) and v.is_integer() else v for k, v in data.items()}


#: what ``check_gpus`` takes, as the OpenAPI document states it
GPUS_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 1024}, {"enum": list(GPU_SHARES)}],
               "description": GPU_SHARE_HELP}


class TaskSpec(_Model):
    name: Annotated[str, Field(pattern=NAME_RE)] = "main"
    count: Annotated[int, Field(ge=1, le=MAX_TASKS, strict=True)] = 1
    gpus: int | float = Field(1, json_schema_extra=GPUS_SCHEMA)
    gpu_type: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    # a share's GPU memory budget (default: its share of the GPU's memory); only with a share
    gpu_memory_mb: Annotated[int, Field(ge=1, le=1 << 24, strict=True)] | None = None
    cpus: Annotated[float, Field(ge=0, le=100000, strict=True)] = 1
    memory_mb: Annotated[int, Field(ge=0, le=1 << 30, strict=True)] = 1024
    command: Annotated[str, Field(min_length=1, max_length=100_000)] | None = None
    # the group's completion policy (OpenPAI's completion; FrameworkController's): this many failed tasks
    # fail the job (None: this group's failures alone never do), this many tasks exiting 0 end it as
    # succeeded, the other tasks being stopped (None: the job succeeds once all its tasks have ended)
    min_failed: Annotated[int, Field(ge=1, le=MAX_TASKS, strict=True)] | None = 1
    min_succeeded: Annotated[int, Field(ge=1, le=MAX_TASKS, strict=True)] | None = None

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, v: Any) -> int | float:
        return check_gpus(v)


Priority = Union[Annotated[int, Field(ge=0, le=1000, strict=True)], Literal["opportunistic"]]


class SubmitEnvironment(_Model):
    """The submitter's environment, captured by the client at submit (as ``sbatch`` exports it): a job
    without an image runs with these variables (its own ``env`` on top, ``HIVE_*`` last), applied only
    after the switch to the owner's account. Names hive-lab sets itself are dropped, not refused: they
    were inherited, not asked for."""

    vars: Annotated[dict[str, Annotated[str, Field(max_length=100_000)]], Field(max_length=1024)] = Field(
        default_factory=dict)
    python: Annotated[str, Field(min_length=1, max_length=4096)] | None = None  # the submitting interpreter

    @field_validator("vars")
    @classmethod
    def _inherited_only(cls, env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if ENV_RE.match(k) and not is_reserved_env(k)}


def is_reserved_env(name: str) -> bool:
    """Set by hive-lab (or a server's secret): never taken from a submitter."""
    return name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES) or name in NEVER_INHERITED_ENV \
        or name.startswith(NEVER_INHERITED_PREFIXES)

class JobSource(_Model):
    """Where a job came from when it was sent in another platform's format (hive-lab_server.formats)."""

    format: Literal["openpai-v1", "openpai-v2", "sbatch", "kubernetes", "volcano"]
    original: Any = Field(description="the document as sent (OpenPAI secrets masked)")
    not_applied: list[str] = Field(default_factory=list, description="what hive-lab did not apply, each with why")
    runtime: dict[str, Any] = Field(default_factory=dict, description="what the platform's task variables need")


class NotebookRun(_Model):
    """A notebook job (hive_lab_server.wire.notebook_run): ``file``, staged in ``files``, executed by papermill
    with ``parameters`` injected after its cell tagged ``parameters``; the executed copy is an output."""

    file: Annotated[str, Field(min_length=1, max_length=4096, description="the notebook, a key of files")]
    parameters: Annotated[dict[str, Any], Field(max_length=256)] = Field(
        default_factory=dict, description="name -> JSON value, set in the notebook after its 'parameters' cell")

    @field_validator("parameters")
    @classmethod
    def _names(cls, parameters: dict[str, Any]) -> dict[str, Any]:
        for name in parameters:
            if not name.isidentifier() or keyword.iskeyword(name):
                raise ValueError(f"parameter name {name!r} is not a Python variable name; use letters, digits "
                                 "and _ (not starting with a digit)")
        return parameters


def _command_somewhere(schema: dict[str, Any]) -> None:
    """The document says what ``_commands_and_names`` and ``_notebook_command`` check: a command for the job,
    for each task, or a notebook (whose command is derived)."""
    text = {"type": "string"}
    schema["anyOf"] = [
        {"required": ["command"], "properties": {"command": text}},
        {"required": ["tasks"], "properties": {"tasks": {"items": {"required": ["command"],
                                                                    "properties": {"command": text}}}}},
        {"required": ["notebook"], "properties": {"notebook": {"type": "object"}}},
    ]


class JobSpec(_Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False, json_schema_extra=_command_somewhere)

    name: Annotated[str, Field(min_length=1, max_length=128)] = "job"
    vc: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    priority: Priority = 0
    image: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    command: Annotated[str, Field(min_length=1, max_length=100_000)] | None = None
    tasks: Annotated[list[TaskSpec], Field(min_length=1, max_length=64)] = Field(default_factory=lambda: [TaskSpec()])
    within: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    # HiveD's pinnedCellId: run inside this pinned cell of the job's VC (a cell an admin pinned to the VC)
    pinned_cell: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    env: dict[str, Annotated[str, Field(max_length=100_000)]] = Field(default_factory=dict)
    working_dir: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    data_dir: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    output_dir: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    max_retries: Annotated[int, Field(ge=0, le=100, strict=True)] = 0
    kind: Literal["batch", "kernel"] = "batch"
    files: dict[str, str] = Field(default_factory=dict)
    # the submitter's environment (client-captured); a job without an image runs in it
    environment: SubmitEnvironment | None = None
    # run time limit of each attempt (seconds); None: the VC's default for batch jobs, none for kernels
    time_limit_s: Annotated[float, Field(gt=0, le=366 * 86400)] | None = None

    @field_validator("working_dir", "output_dir")
    @classmethod
    def _inside_the_jobs_dir(cls, v: str | None, info: Any) -> str | None:
        """Every job runs in its own directory (HIVE_WORKING_DIR): ``working_dir`` is where its tasks start
        and ``output_dir`` its HIVE_OUTPUT_DIR, both inside it; a path that leaves it is refused (issue 24)."""
        if v is None:
            return v
        if ".." in v.replace("\\", "/").split("/") or v.startswith(("/", "\\", "~")):
            raise ValueError(f"{info.field_name} {v!r:.80} leaves the job's own directory; every job runs in its own "
                             "(HIVE_WORKING_DIR, output in HIVE_OUTPUT_DIR): give a path inside it, relative and "
                             "without '..', or leave it out")
        return v

    @field_validator("time_limit_s", mode="before")
    @classmethod
    def _time_limit_seconds(cls, v: Any) -> Any:
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"give the run time limit in seconds as a number, e.g. 7200 for 2 hours (got {v!r:.40})")
        return v
    # the job saves a checkpoint on SIGUSR1: it gets the signal and checkpoint_grace_s before it is paused,
    # preempted, migrated or resized (others get SIGTERM at once, as any stop); docs/checkpoint.md
    checkpoint: Annotated[bool, Field(strict=True)] = False
    # Gavel's job type (e.g. "ResNet-50 (batch size 64)"): its known throughputs per GPU type
    job_type: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    # an elastic job: one task whose GPU count may be changed between min_gpus and max_gpus (resize)
    min_gpus: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = None
    max_gpus: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = None
    # a notebook job: the staged notebook run with parameters, its executed copy an output (its command
    # is derived: notebook_run.notebook_command)
    notebook: NotebookRun | None = None
    # start only once other jobs ended as asked (issue 27; pipelines/dependencies.py); "after": short form
    depends_on: DependsOn = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _after(cls, body: Any) -> Any:
        try:
            return fold_after(body)
        except ValueError as exc:
            raise SpecError(f"after: {exc}", "after") from None
    # set by formats.read_job for a job sent as an OpenPAI job, an sbatch script or a Kubernetes manifest
    source: JobSource | None = None

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not ENV_RE.match(key):
                raise ValueError(f"environment variable name {key!r} is invalid; use letters, digits and _")
            if key in RESERVED_ENV or key.startswith(RESERVED_ENV_PREFIXES):
                raise ValueError(f"{key} is set by hive-lab; remove it from env")
        return env

    @field_validator("files")
    @classmethod
    def _files(cls, files: dict[str, str]) -> dict[str, str]:
        total = 0
        norms: dict[str, str] = {}
        for path, text in files.items():
            norm = posixpath.normpath(path) if path else ""
            if not path or path.startswith("/") or norm.startswith("..") or "\x00" in path or norm == ".":
                raise ValueError(f"file name {path!r} must be a relative path inside the working dir")
            if norm in RESERVED_PATHS:
                raise ValueError(f"file name {path!r} is the job's {norm} dir; rename the file "
                                 f"(files may go inside {norm}/, not replace it)")
            if norm.split("/", 1)[0] in RESERVED_DIRS:
                raise ValueError(f"file name {path!r} is inside the job's {norm.split('/', 1)[0]} dir, which "
                                 "holds the tasks' logs; stage it elsewhere")
            if norm in norms:
                raise ValueError(f"file names {norms[norm]!r} and {path!r} name the same file; keep one")
            norms[norm] = path
            total += len(text.encode("utf-8"))  # lone surrogates were refused before (parse_job_spec)
        for norm, path in norms.items():
            parent = posixpath.dirname(norm)
            while parent:
                if parent in norms:
                    raise ValueError(f"file {norms[parent]!r} is also a directory of {path!r}; rename one of them")
                parent = posixpath.dirname(parent)
        if total > MAX_FILES_BYTES:
            raise ValueError(f"files hold {total} bytes; keep them under {MAX_FILES_BYTES} bytes")
        return files

    @model_validator(mode="after")
    def _commands_and_names(self) -> "JobSpec":
        seen = set()
        for i, task in enumerate(self.tasks):
            if task.name in seen:
                raise SpecError(f"tasks[{i}].name: task name {task.name!r} is used twice; give each task group its own name", f"tasks[{i}].name")
            seen.add(task.name)
            if task.command is None and self.command is None:
                raise SpecError(f"tasks[{i}].command: give a command for the job (command) or for this task", f"tasks[{i}].command")
            if is_share(task.gpus) and (task.count != 1 or len(self.tasks) != 1):
                raise SpecError(f"tasks[{i}].gpus: a share of a GPU ({task.gpus:g}) is one task on one GPU; a job of "
                                "several tasks (a gang) asks for whole GPUs", f"tasks[{i}].gpus")
            if is_share(task.gpus) and self.within is not None:
                raise SpecError("within: a share of a GPU is one task on one GPU; drop within", "within")
            if task.gpu_memory_mb is not None and not is_share(task.gpus):
                raise SpecError(f"tasks[{i}].gpu_memory_mb: a memory budget goes with a share of a GPU (gpus 0.5, "
                                "0.25 or 0.125); a whole GPU's memory is all its own", f"tasks[{i}].gpu_memory_mb")
            for key in ("min_failed", "min_succeeded"):
                value = getattr(task, key)
                if value is not None and value > task.count:
                    raise SpecError(f"tasks[{i}].{key}: {value} is more than the group's {task.count} task"
                                    f"{'s' if task.count != 1 else ''}, so it could never be reached; give at most "
                                    f"{task.count} (or null: never)", f"tasks[{i}].{key}")
            if task.gpus == 0 and task.cpus == 0:
                raise SpecError(f"tasks[{i}].cpus: a task with no GPUs (gpus: 0) does CPU work; ask for cpus > 0 "
                                "or for GPUs", f"tasks[{i}].cpus")
        return self

    @model_validator(mode="after")
    def _named_dirs_are_dirs(self) -> "JobSpec":
        """``working_dir`` and ``output_dir`` are made in the job's dir before it starts: a staged file in their
        way, or the logs dir, would only fail the launch; say it now."""
        files = {posixpath.normpath(path) for path in self.files}
        for name in ("working_dir", "output_dir"):
            value = getattr(self, name)
            norm = posixpath.normpath(value.replace("\\", "/")) if value else "."
            if norm == ".":
                continue
            if norm.split("/", 1)[0] in RESERVED_DIRS:
                raise SpecError(f"{name}: {value!r} is inside the job's logs dir, which holds the tasks' logs; "
                                "choose another directory", name)
            part = norm
            while part:
                if part in files:
                    raise SpecError(f"{name}: {value!r} must be a directory, but files stages a file at {part!r}; "
                                    "rename one of them", name)
                part = posixpath.dirname(part)
        return self

    @model_validator(mode="before")
    @classmethod
    def _notebook_command(cls, data: Any) -> Any:
        """A notebook job's command is derived from its notebook (and stored, so its details show it)."""
        if not isinstance(data, dict) or not isinstance(data.get("notebook"), dict):
            return data
        run = data["notebook"]
        file, parameters = run.get("file"), run.get("parameters") or {}
        if not isinstance(file, str) or not isinstance(parameters, dict):
            return data  # the field's own validation says what is wrong
        env = data.get("environment") if not data.get("image") else None
        python = env.get("python") if isinstance(env, dict) and isinstance(env.get("python"), str) else None
        try:
            derived = notebook_command(file, parameters, python)
        except (TypeError, ValueError):
            raise SpecError("notebook.parameters: give JSON values (numbers, strings, lists, mappings)",
                            "notebook.parameters") from None
        if data.get("command") not in (None, derived):
            raise SpecError("command: a notebook job runs its notebook; drop command (or notebook)", "command")
        for i, task in enumerate(data.get("tasks") or []):
            if isinstance(task, dict) and task.get("command") is not None:
                raise SpecError(f"tasks[{i}].command: a notebook job runs its notebook; drop the task's command",
                                f"tasks[{i}].command")
        return {**data, "command": derived}

    @model_validator(mode="after")
    def _notebook_staged(self) -> "JobSpec":
        if self.notebook is None:
            return self
        file = self.notebook.file
        if posixpath.normpath(file) not in {posixpath.normpath(p) for p in self.files}:
            raise SpecError(f"notebook.file: {file!r} is not among the job's files; stage the notebook "
                            "(files: {path: its JSON text}; hive-lab submit --notebook does it)", "notebook.file")
        if not file.endswith(".ipynb"):
            raise SpecError(f"notebook.file: {file!r} is not a notebook (.ipynb)", "notebook.file")
        return self

    @model_validator(mode="after")
    def _elastic(self) -> "JobSpec":
        if self.min_gpus is None and self.max_gpus is None:
            return self
        field = "min_gpus" if self.min_gpus is not None else "max_gpus"
        if self.min_gpus is None or self.max_gpus is None:
            raise SpecError(f"{field}: an elastic job gives both min_gpus and max_gpus", field)
        if self.min_gpus > self.max_gpus:
            raise SpecError(f"min_gpus: {self.min_gpus} is more than max_gpus ({self.max_gpus})", "min_gpus")
        if len(self.tasks) != 1 or self.tasks[0].count != 1:
            raise SpecError("tasks: an elastic job (min_gpus..max_gpus) has exactly one task (count 1); its GPU "
                            "count is what changes", "tasks")
        if not self.min_gpus <= self.tasks[0].gpus <= self.max_gpus:
            raise SpecError(f"tasks[0].gpus: {self.tasks[0].gpus} is outside min_gpus..max_gpus "
                            f"({self.min_gpus}..{self.max_gpus})", "tasks[0].gpus")
        return self

    @model_validator(mode="after")
    def _opportunistic_retries(self) -> "JobSpec":
        # being preempted is the normal fate of opportunistic work: back to the queue unless told otherwise
        if self.opportunistic and "max_retries" not in self.model_fields_set:
            self.max_retries = OPPORTUNISTIC_MAX_RETRIES
        return self

    @property
    def opportunistic(self) -> bool:
        return self.priority == "opportunistic"

    @property
    def core_priority(self) -> int:
        return -1 if self.priority == "opportunistic" else int(self.priority)

    @property
    def total_gpus(self) -> int | float:
        return sum(t.gpus * t.count for t in self.tasks)

    @property
    def gpu_share(self) -> float:
        """The share of one GPU the job asks for (0.0: whole GPUs)."""
        return self.tasks[0].gpus if len(self.tasks) == 1 and is_share(self.tasks[0].gpus) else 0.0

    @property
    def task_count(self) -> int:
        return sum(t.count for t in self.tasks)


# ---------------------------------------------------------------------------------------------
# OpenPAI's protocol v1 as OpenPAI documented it: the OpenAPI document's schema for it. Requests in
# this form (and v2, sbatch, Kubernetes) are read by hive_lab_server.api.formats (formats/openpai_v1.py).


class PaiPort(_Model):
    label: str
    beginAt: int = 0
    portNumber: int = 1


class PaiTaskRole(_Model):
    name: Annotated[str, Field(pattern=NAME_RE)] = "main"
    shmMB: int | None = None
    portList: list[PaiPort] = Field(default_factory=list)
    minFailedTaskCount: int | None = None
    minSucceededTaskCount: int | None = None
    taskNumber: Annotated[int, Field(ge=1, le=MAX_TASKS, strict=True)] = 1
    cpuNumber: Annotated[float, Field(ge=0, le=100000, strict=True)] = 1
    memoryMB: Annotated[int, Field(ge=0, le=1 << 30, strict=True)] = 1024
    gpuNumber: int | float = Field(0, json_schema_extra=GPUS_SCHEMA)

    @field_validator("gpuNumber", mode="before")
    @classmethod
    def _gpus(cls, v: Any) -> int | float:
        return check_gpus(v)
    gpuType: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    command: Annotated[str, Field(min_length=1, max_length=100_000)]


class PaiJob(_Model):
    jobName: Annotated[str, Field(min_length=1, max_length=128)]
    image: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    authFile: str | None = None
    dataDir: Annotated[str, Field(max_length=4096)] | None = None
    outputDir: Annotated[str, Field(max_length=4096)] | None = None
    codeDir: Annotated[str, Field(max_length=4096)] | None = None
    virtualCluster: Annotated[str, Field(max_length=128)] | None = None
    gpuType: str | None = None
    retryCount: Annotated[int, Field(ge=-2, strict=True)] = 0
    killAllOnCompletedTaskNumber: int | None = None
    extras: dict[str, Any] = Field(default_factory=dict)
    jobPriority: Priority = 0
    taskRoles: Annotated[list[PaiTaskRole], Field(min_length=1, max_length=64)]
    jobEnvs: dict[str, Any] = Field(default_factory=dict)


def _loc_to_field(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "literal['opportunistic']", "constrained-int", "function-after[_commands_and_names(), JobSpec]"):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or None  # type: ignore[return-value]


def _error_from_validation(exc: ValidationError, model: type[BaseModel]) -> SpecError:
    errs = exc.errors(include_url=False)
    # Prefer errors that are not about a union alternative ("priority" gives one per branch).
    err = errs[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (p.startswith("literal[") or p == "int")))
    field = _loc_to_field(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = model
        allowed = sorted(parent.model_fields)
        if len(loc) >= 2 and loc[0] in ("tasks", "taskRoles"):
            allowed = sorted(TaskSpec.model_fields)
        return SpecError(f"{field}: unknown field; remove it (allowed fields: {', '.join(allowed)})", field)
    if kind == "missing":
        return SpecError(f"{field}: this field is required; add it", field)
    if field and field.endswith("priority") or field in ("jobPriority",):
        return SpecError(f"{field}: use an integer 0..1000 or \"opportunistic\"", field)
    ctx = err.get("ctx") or {}
    msg = err["msg"]
    if kind == "value_error" and "error" in ctx:
        inner = ctx["error"]
        if isinstance(inner, SpecError):
            return inner
        msg = str(inner)
    if kind == "assertion_error" or kind.startswith("value_error"):
        msg = msg.removeprefix("Value error, ")
    got = err.get("input")
    got_s = "" if isinstance(got, (dict, list)) or got is None and kind != "none_required" else f" (got {got!r:.60})"
    return SpecError(f"{field}: {'i' + msg[1:] if msg.startswith('Input ') else msg}{got_s}", field)


def _text_problem(text: str, nul_ok: bool = False) -> str | None:
    """Why ``text`` cannot be stored or handed to a process: a NUL character (PostgreSQL text columns,
    process arguments and environments cannot carry one) or a lone UTF-16 surrogate (JSON's
    ``"\\ud800"`` decodes to one; it has no UTF-8 form, so no file, log or database can hold it)."""
    if not nul_ok and "\x00" in text:
        return "contains a NUL character (\\u0000); remove it"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"contains a lone UTF-16 surrogate ({text[exc.start]!r} at character {exc.start}), which is not "
                "text; send valid Unicode (e.g. encode binary data as base64)")
    return None


def _bad_text(value: Any, path: str = "") -> tuple[str, str] | None:
    """(field, problem) of the first string that cannot be stored; ``files`` contents may hold NULs."""
    if isinstance(value, str):
        problem = _text_problem(value)
        return (path, problem) if problem else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        sub = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
        if isinstance(key, str):
            problem = _text_problem(key)
            if problem:
                return (path or sub, f"name {key!r} {problem}") if path else (sub, problem)
        if path == "files" and isinstance(item, str):
            problem = _text_problem(item, nul_ok=True)
            if problem:
                return "files", f"file {key!r} {problem}"
            continue
        found = _bad_text(item, sub)
        if found:
            return found
    return None


def parse_job_spec(body: Any) -> JobSpec:
    """Validate hive-lab's own request body into a JobSpec (another platform's document goes through
    ``formats.from_document``, which translates it and then calls this: formats imports spec, never
    the other way round)."""
    if not isinstance(body, dict):
        raise SpecError("send a JSON object describing the job (see spec.yaml: JobSpec)", None)
    bad = _bad_text(body)
    if bad:
        raise SpecError(f"{bad[0]}: {bad[1]}", bad[0])
    try:
        return JobSpec.model_validate(body)
    except SpecError:
        raise
    except ValidationError as exc:
        raise _error_from_validation(exc, JobSpec) from None
