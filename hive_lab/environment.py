"""The submitter's environment, captured at submit: a job runs where it was submitted from.

As ``sbatch`` exports the submitting shell's environment, ``%%submit``, ``hive-lab submit`` and the
Python client send theirs (the kernel's or the shell's ``PATH``, the active venv or conda env, the
user's own variables) with the job, minus what must never travel: tokens, Jupyter's and hive-lab's own
variables (the server drops those too). The server applies it only after it switched to the owner's
account, and only to jobs without an image (a container has its image's environment).
"""

from __future__ import annotations

import os
import sys

NEVER = {"JUPYTER_TOKEN", "JPY_API_TOKEN", "JPY_SESSION_NAME", "PWD", "OLDPWD", "SHLVL", "_",
         "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}
NEVER_PREFIXES = ("JUPYTERHUB_", "JUPYTER_", "JPY_", "KERNEL_", "PYDEVD_", "HIVE_", "BASH_FUNC_")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "PRIVATE_KEY")


def travels(name: str) -> bool:
    """Whether a variable of the submitter's environment goes with the job."""
    upper = name.upper()
    return (name not in NEVER and not name.startswith(NEVER_PREFIXES)
            and not any(word in upper for word in SECRET_WORDS))


def submitter_environment(environ: dict[str, str] | None = None, python: str | None = None) -> dict:
    """``{"vars": {...}, "python": ...}`` for a job spec's ``environment``."""
    env = os.environ if environ is None else environ
    return {"vars": {k: v for k, v in sorted(env.items()) if travels(k)}, "python": python or sys.executable}


def with_environment(body: dict) -> dict:
    """``body`` with the submitter's environment, unless it names an image or an environment already."""
    if body.get("image") or "environment" in body or body.get("pai") or "jobName" in body or "protocolVersion" in body:
        return body
    return {**body, "environment": submitter_environment()}
