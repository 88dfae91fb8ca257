"""Notebook jobs: a staged notebook executed with parameters, its executed copy kept as an output.

A job spec's ``notebook`` (``{"file": "train.ipynb", "parameters": {"lr": 0.1}}``) becomes the job's
command: papermill (the field's convention: values are injected in a new cell after the cell tagged
``parameters``) runs the notebook in the job's working dir and writes the executed copy into the job's
output dir, where the panel, ``hive-lab outputs`` and the API list it. Papermill is one of hive-lab's
dependencies, so it is there in the submitter's environment, where a job without an image runs.

The command is derived from the spec (and stored with it, so a job's details show what ran):
- the interpreter is the submitter's (``environment.python``) when the job runs in the submitter's
  environment, else ``python3`` from the job's PATH (an image's);
- the kernel is ``python3``, i.e. that same interpreter: a notebook saved with a GPU kernel
  (hive-gpu-1) must not start a second, scheduled kernel from inside its own job;
- the spec's parameters travel base64-encoded (no shell quoting of user values), and an element of a
  sweep adds its own parameters file (``HIVE_PARAMS_FILE``) on top, so its values win.
"""

from __future__ import annotations

import base64
import json
import posixpath
import shlex
from typing import Any

EXECUTED_SUFFIX = ".executed.ipynb"


def executed_name(file: str) -> str:
    """``train.ipynb`` -> ``train.executed.ipynb`` (the output's name, in the job's output dir)."""
    base = posixpath.basename(file)
    return (base[:-len(".ipynb")] if base.endswith(".ipynb") else base) + EXECUTED_SUFFIX


def notebook_command(file: str, parameters: dict[str, Any], python: str | None = None) -> str:
    """The shell command that runs the staged notebook ``file`` with ``parameters``."""
    encoded = base64.b64encode(json.dumps(parameters, sort_keys=True, allow_nan=False).encode()).decode()
    interpreter = shlex.quote(python) if python else "python3"
    output = '"$HIVE_OUTPUT_DIR"/' + shlex.quote(executed_name(file))
    notebook = '"$HIVE_WORKING_DIR"/' + shlex.quote(file)  # staged in the job's dir; it may start in a subdir
    return (f"{interpreter} -m papermill --no-progress-bar -k python3 {notebook} {output} "
            f"-b {encoded}" + ' ${HIVE_PARAMS_FILE:+-f "$HIVE_PARAMS_FILE"}')
