"""Building job specs from ``%%submit`` / ``hive-lab submit`` options (pure, apart from reading files)."""

from __future__ import annotations

import glob
import os
import pathlib
import shlex
import sys

from .errors import BadRequest

CELL_FILE = "hive_cell.py"
NAME_MAX = 60  # a default name is a label for lists (the panel, hive-lab jobs), not the whole comment


def _label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= NAME_MAX else text[:NAME_MAX - 1].rstrip() + "…"


def cell_name(code: str, notebook: str | None = None) -> str:
    """A job's name when none is given: the cell's first comment (``# train resnet`` -> ``train resnet``), else
    the notebook's name (``sweep.ipynb`` -> ``sweep``), else ``cell``; so lists never fill with ``cell [4]``."""
    for line in code.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#!"):
            continue
        if stripped.startswith("#"):
            words = _label(stripped.lstrip("#").strip())
            if words:
                return words
            continue
        break  # the first code line: a comment below it describes that line, not the cell
    if notebook:
        stem = pathlib.PurePath(notebook).stem
        if stem:
            return _label(stem)
    return "cell"


def command_name(command: str | None) -> str | None:
    """A CLI job's name when none is given: the script it runs (``python train.py --lr 3`` -> ``train.py``),
    else the program (``nvidia-smi``); None without a command (the spec file's or the server's own)."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        words = (command or "").split()
    if not words:
        return None
    for word in words[1:]:
        if not word.startswith("-") and pathlib.PurePath(word).suffix in (".py", ".sh", ".ipynb", ".R", ".jl"):
            return _label(pathlib.PurePath(word).name)
    return _label(pathlib.PurePath(words[0]).name) or None
SKIP_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints", ".venv", "node_modules"}


def parse_priority(value) -> int | str | None:
    """``"opportunistic"`` or an integer 0..1000 (the server checks the range too)."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    if text in ("opportunistic", "opp", "-1"):
        return "opportunistic"
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"priority must be an integer 0..1000 or 'opportunistic', got {value!r}",
                         field="priority") from None


def split_paths(values) -> list[str]:
    """``--files a.py,b.csv c/`` -> ["a.py", "b.csv", "c/"]."""
    out: list[str] = []
    for value in values or []:
        out.extend(p for p in str(value).split(",") if p.strip())
    return [p.strip() for p in out]


def collect_files(paths, base_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Read the listed files (globs and directories allowed) as UTF-8 text, keyed by their path
    relative to ``base_dir`` (or their name when outside it). Raises ``BadRequest`` naming the path."""
    base = pathlib.Path(base_dir or os.getcwd()).resolve()
    files: dict[str, str] = {}
    for pattern in split_paths(paths):
        expanded = os.path.join(base, os.path.expanduser(pattern))  # absolute patterns stay absolute
        matches = sorted(glob.glob(expanded, recursive=True)) if glob.has_magic(expanded) else [expanded]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise BadRequest(f"--files: {pattern} does not exist (relative paths start at {base})", field="files")
        for match in matches:
            path = pathlib.Path(match)
            if path.is_dir():
                for sub in sorted(path.rglob("*")):
                    if sub.is_file() and not (SKIP_DIRS & set(sub.relative_to(path).parts[:-1])):
                        _add(files, sub, base)
            else:
                _add(files, path, base)
    return files


def _add(files: dict[str, str], path: pathlib.Path, base: pathlib.Path) -> None:
    resolved = path.resolve()
    try:
        name = resolved.relative_to(base).as_posix()
    except ValueError:
        name = path.name
    try:
        files[name] = resolved.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadRequest(f"--files: {path} is not UTF-8 text; only small text files can be staged "
                         "(put data in the job's data_dir instead)", field="files") from None


def python_command(script: str = CELL_FILE, image: str | None = None, local_python: str | None = None) -> str:
    """A shell command running ``script`` with a fresh Python: the image's ``python3``/``python``;
    without an image the kernel's interpreter when it exists on the node, else ``python3``."""
    q = shlex.quote(script)
    if image is None and local_python:
        lp = shlex.quote(local_python)
        return f'if [ -x {lp} ]; then exec {lp} -u {q}; else exec python3 -u {q}; fi'
    return f'exec "$(command -v python3 || command -v python)" -u {q}'


GPU_SHARES = (0.5, 0.25, 0.125)


def parse_gpus(text) -> int | float:
    """``--gpus`` as the server takes it: a whole number of GPUs, or a share of one GPU (0.5, 0.25, 0.125).
    ValueError says what is allowed (argparse ``type=`` shows it)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = None
    if value is not None and value.is_integer() and value >= 0:
        return int(value)
    if value in GPU_SHARES:
        return value
    raise ValueError(f"--gpus must be a whole number of GPUs, 0 or more, or a share of one GPU "
                     f"(0.5, 0.25 or 0.125), got {text!r}")


def cell_spec(code: str, *, gpus: int | float = 0, gpu_type: str | None = None, vc: str | None = None,
              priority=None, image: str | None = None, name: str | None = None, tasks: int = 1,
              files: dict[str, str] | None = None, env: dict[str, str] | None = None,
              local_python: str | None = sys.executable, time_limit=None) -> dict:
    """The ``POST jobs`` body running a notebook cell as a batch job."""
    if tasks < 1:
        raise BadRequest(f"--tasks must be at least 1, got {tasks}", field="tasks[0].count")
    if gpus < 0:
        raise BadRequest(f"--gpus must be 0 or more, got {gpus}", field="tasks[0].gpus")
    staged = dict(files or {})
    if CELL_FILE in staged:
        raise BadRequest(f"--files: {CELL_FILE} is the name the cell is staged under; rename your file",
                         field="files")
    staged[CELL_FILE] = code
    spec: dict = {
        "name": name or cell_name(code),
        "command": python_command(CELL_FILE, image, local_python),
        "tasks": [{"name": "main", "count": tasks, "gpus": gpus, "gpu_type": gpu_type}],
        "kind": "batch",
        "files": staged,
    }
    if vc:
        spec["vc"] = vc
    p = parse_priority(priority)
    if p is not None:
        spec["priority"] = p
    if image:
        spec["image"] = image
    if env:
        spec["env"] = env
    if time_limit is not None and time_limit != "":
        from .durations import parse_duration

        spec["time_limit_s"] = parse_duration(time_limit)
    return spec


def parse_parameters(items) -> dict:
    """``["lr=0.1", "name=resnet", "layers=[1,2]"]`` -> ``{"lr": 0.1, "name": "resnet", "layers": [1, 2]}``:
    a value is read as JSON when it is JSON, else kept as the string it is."""
    import json

    parameters: dict = {}
    for item in items or []:
        name, sep, value = str(item).partition("=")
        if not sep or not name.strip():
            raise BadRequest(f"a parameter is NAME=VALUE, e.g. lr=0.1; got {item!r}", field="notebook.parameters")
        try:
            parameters[name.strip()] = json.loads(value)
        except ValueError:
            parameters[name.strip()] = value
    return parameters


def notebook_job_spec(path: str | os.PathLike, parameters: dict | None = None, **options) -> dict:
    """The ``POST jobs`` body running the notebook at ``path`` as a batch job: staged, executed by
    papermill with ``parameters`` injected after its cell tagged ``parameters``, its executed copy an
    output of the job. ``options`` are :func:`cell_spec`'s (gpus, vc, files, time_limit, ...)."""
    nb = pathlib.Path(path)
    if nb.suffix != ".ipynb":
        raise BadRequest(f"{path} is not a notebook (.ipynb)", field="notebook.file")
    try:
        text = nb.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadRequest(f"cannot read the notebook {path}: {exc.strerror}", field="notebook.file") from None
    spec = cell_spec("", **options)  # the fields and checks a cell job has
    staged = spec["files"]
    del staged[CELL_FILE]
    if nb.name in staged:
        raise BadRequest(f"--files: {nb.name} is the notebook's own name in the job; rename your file",
                         field="files")
    staged[nb.name] = text
    del spec["command"]  # the server derives it from the notebook
    spec["name"] = options.get("name") or nb.stem
    spec["notebook"] = {"file": nb.name, "parameters": dict(parameters or {})}
    return spec


SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash")


def read_job_file(path: str, text: str | None = None) -> tuple[str, str, bool]:
    """(text, content type, foreign) of a job file: ``foreign`` when it is not hive-lab's own spec but
    an OpenPAI job, an sbatch script or a Kubernetes manifest, which the server reads as it is."""
    import pathlib

    import yaml

    from .errors import BadRequest

    if text is None:
        try:
            text = pathlib.Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise BadRequest(f"cannot read the job file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise BadRequest(f"the job file {path} is not UTF-8 text") from None
    if path.endswith(SCRIPT_SUFFIXES) or text.startswith("#!") or "\n#SBATCH" in "\n" + text:
        return text, "text/plain", True
    ctype = "application/json" if path.endswith(".json") else "application/yaml"
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return text, ctype, True  # e.g. OpenPAI's JSON with // comments: the server says what is wrong
    doc = docs[0] if len(docs) == 1 else None
    foreign = not isinstance(doc, dict) or any(k in doc for k in ("protocolVersion", "protocol_version", "jobName",
                                                                  "taskRoles", "apiVersion"))
    return text, ctype, foreign
