"""Which format a submitted document is in, and the document read from the request body."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from hive_lab_server.api.formats.common import fail

SCRIPT_TYPES = ("text/plain", "text/x-shellscript", "application/x-sh", "text/x-sh")


def _strip_line_comments(text: str) -> str:
    """OpenPAI's v1 documentation writes its JSON examples with ``//`` comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def read_body(raw: bytes, content_type: str | None) -> Any:
    """The document in the body: a JSON or YAML value, or a batch script (str).

    Only a body sent as a script (``text/plain`` and the shell types), or one that reads as one (``#!``, an
    ``#SBATCH`` line), is a batch script: a JSON or YAML document that is a bare string is refused, not run."""
    document = _read_document(raw, content_type)
    if isinstance(document, _Script):
        return str(document)
    if isinstance(document, str):
        raise fail("body", "the body is a JSON or YAML string, not a job: send a JSON or YAML object describing the "
                           "job, or an sbatch script as text/plain")
    return document


class _Script(str):
    """A body taken as a batch script (not a JSON or YAML string)."""


def _read_document(raw: bytes, content_type: str | None) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail("body", f"the body is not UTF-8 text ({exc})") from None
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    if text.lstrip().startswith(("{", "[")) and not re.search(r"^#SBATCH", text, re.M):
        # a JSON document, whatever the Content-Type says (a browser's fetch() of a string body sends
        # text/plain unless told otherwise; no batch script starts with a brace)
        try:
            return json.loads(text)
        except ValueError as exc:
            try:
                return json.loads(_strip_line_comments(text))
            except ValueError:
                if ctype not in ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"):
                    raise fail("body", f"the body is not valid JSON ({exc}); send a JSON object describing "
                                       "the job") from None
    if ctype in SCRIPT_TYPES or text.startswith("#!") or re.search(r"^#SBATCH", text, re.M):
        return _Script(text)
    if ctype in ("", "application/json"):
        try:
            return json.loads(text)
        except ValueError as exc:
            if ctype == "application/json":
                try:
                    return json.loads(_strip_line_comments(text))
                except ValueError:
                    raise fail("body", f"the body is not valid JSON ({exc}); send a JSON object") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        try:
            return json.loads(_strip_line_comments(text))
        except ValueError:
            pass
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise fail("body", f"the body is neither JSON nor YAML{at} ({getattr(exc, 'problem', exc)}); "
                           "send a job spec, an OpenPAI job, a Kubernetes manifest or an sbatch script") from None
    jobs = [d for d in docs if not (isinstance(d, dict) and d.get("kind") in ("ConfigMap", "Service", "Secret"))]
    if len(jobs) > 1:
        raise fail("body", f"the file holds {len(jobs)} documents; send one job per request")
    if not jobs:
        raise fail("body", "the body holds no job")
    return jobs[0]


def detect(doc: Any) -> str:
    """"hive-lab", "openpai-v1", "openpai-v2", "kubernetes", "sbatch"."""
    if isinstance(doc, str):
        return "sbatch"
    if not isinstance(doc, dict):
        raise fail("body", "send a JSON object describing the job (hive-lab's JobSpec, an OpenPAI job, a Kubernetes "
                           "manifest) or an sbatch script as text/plain")
    if "protocolVersion" in doc or "protocol_version" in doc or isinstance(doc.get("taskRoles"), dict):
        return "openpai-v2"
    if "jobName" in doc or isinstance(doc.get("taskRoles"), list):
        return "openpai-v1"
    if "apiVersion" in doc and "kind" in doc:
        return "kubernetes"
    return "hive-lab"
