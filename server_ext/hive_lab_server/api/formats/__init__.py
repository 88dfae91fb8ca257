"""Job files people already have, run as hive-lab jobs: OpenPAI's job protocol (v1 and v2), Slurm batch
scripts, Kubernetes Job/Pod and Volcano Job manifests (docs/formats.md).

``read_job(raw, content_type)`` is the one entry point: it reads the body, detects its format, runs
that format's translator (a pure function to hive-lab's own request) and validates the result as a
``JobSpec`` that keeps the original (secrets masked), its format and what was not applied.
Errors are ``SpecError`` naming the field of the original.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from hive_lab_server.wire.spec import JobSpec, SpecError, _bad_text, _text_problem, parse_job_spec
from hive_lab_server.api.formats import kubernetes, openpai_v1, openpai_v2, sbatch
from hive_lab_server.api.formats.common import Translation
from hive_lab_server.api.formats.detect import detect, read_body

FORMATS = ("hive-lab", "openpai-v1", "openpai-v2", "sbatch", "kubernetes", "volcano")
_TRANSLATORS: dict[str, Callable[[Any], Translation]] = {
    "openpai-v1": openpai_v1.translate, "openpai-v2": openpai_v2.translate,
    "kubernetes": kubernetes.translate, "sbatch": sbatch.translate,
}


def translate(doc: Any, *, ignore_image: bool = False) -> Translation | None:
    """The translation of a foreign document (None for hive-lab's own JobSpec). ``ignore_image``
    (``--no-image``): the images the document names are not applied, and noted as such."""
    fmt = detect(doc)
    if fmt == "hive-lab":
        return None
    if fmt == "sbatch":  # a batch script names no image
        return _TRANSLATORS[fmt](doc)
    return _TRANSLATORS[fmt](doc, ignore_image=ignore_image)


def _original_field(t: Translation, field: str | None) -> str | None:
    """A JobSpec field (``tasks[1].gpus``) as the original names it (``taskRoles[1].gpuNumber``)."""
    if not field:
        return field
    names = [task["name"] for task in t.request.get("tasks", [])]
    m = re.match(r"tasks\[(\d+)\](?:\.(\w+))?", field)
    if t.format == "openpai-v1":
        keys = {"gpus": "gpuNumber", "cpus": "cpuNumber", "memory_mb": "memoryMB", "count": "taskNumber",
                "command": "command", "gpu_type": "gpuType", "name": "name"}
        if m:
            return f"taskRoles[{m.group(1)}]" + (f".{keys.get(m.group(2), m.group(2))}" if m.group(2) else "")
        return {"env": "jobEnvs", "max_retries": "retryCount", "vc": "virtualCluster", "name": "jobName",
                "priority": "jobPriority", "image": "image"}.get(field.split(".")[0].split("[")[0], field)
    if t.format == "openpai-v2" and m and int(m.group(1)) < len(names):
        keys = {"gpus": "resourcePerInstance.gpu", "cpus": "resourcePerInstance.cpu", "count": "instances",
                "memory_mb": "resourcePerInstance.memoryMB", "command": "commands"}
        return f"taskRoles.{names[int(m.group(1))]}" + (f".{keys.get(m.group(2), m.group(2))}" if m.group(2) else "")
    return field


def _shell(t: Translation) -> None:
    """OpenPAI runs a v2 role's commands as one bash script; hive-lab's launchers use /bin/sh (v1's one-line
    commands are kept as they are)."""
    import shlex

    if t.format == "openpai-v2":
        for task in t.request["tasks"]:
            task["command"] = "exec bash -c " + shlex.quote(task["command"])


def read_job(raw: bytes, content_type: str | None = None,
             seal: Callable[[dict[str, str]], dict[str, str]] | None = None) -> JobSpec:
    """The ``JobSpec`` of a request body in any supported format; ``seal(values)`` encrypts secrets."""
    return from_document(read_body(raw, content_type), seal)

def from_document(doc: Any, seal: Callable[[dict[str, str]], dict[str, str]] | None = None, *,
                  ignore_image: bool = False) -> JobSpec:
    """The ``JobSpec`` of a parsed document in any supported format; ``ignore_image``: run its commands
    as processes, whatever image it names (the caller checks that the launcher has no containers)."""
    bad = ("script", _text_problem(doc)) if isinstance(doc, str) else _bad_text(doc)
    if bad and bad[1]:  # text no store or process can hold (NUL, lone surrogates), named before anything else
        raise SpecError(f"{bad[0]}: {bad[1]}", bad[0])
    t = translate(doc, ignore_image=ignore_image)
    if t is None:
        if ignore_image and isinstance(doc, dict):
            doc = {k: v for k, v in doc.items() if k != "image"}
        return parse_job_spec(doc)
    _shell(t)
    if t.secrets:
        if seal is None:
            raise SpecError("secrets: this server cannot keep secrets; remove them", "secrets")
        t.request.setdefault("env", {}).update(seal(t.secrets))
    t.request["source"] = {"format": t.format, "original": t.original, "not_applied": t.not_applied,
                           "runtime": t.runtime}
    try:
        return parse_job_spec(t.request)
    except SpecError as exc:
        field = _original_field(t, exc.field)
        message = exc.message
        if exc.field and field != exc.field and message.startswith(exc.field):
            message = field + message[len(exc.field):]
        raise SpecError(message, field) from None
