"""What ``POST jobs`` takes its body for (``formats.detect.read_body``): a batch script only when sent as one
(``text/plain``, the shell types) or when it reads as one (``#!``, an ``#SBATCH`` line); a JSON or YAML document
that is a bare string is refused with a 400 that says what to send, never run as a script.

Found by the schemathesis run (tests/server/api/test_fuzz.py): ``application/yaml`` body ``hello`` was
accepted and queued as the sbatch script ``hello``."""

from __future__ import annotations

import pytest

from hive_lab_server.api.formats.detect import detect, read_body
from hive_lab_server.wire.spec import SpecError


@pytest.mark.parametrize(("body", "content_type"), [
    (b"hello", "application/yaml"),
    (b"echo hi", "text/yaml"),
    (b'"echo hi"', "application/json"),
    (b'"echo hi"', ""),
    (b"'echo hi'", "application/yaml"),
    (b"echo hi", ""),
])
def test_a_json_or_yaml_string_is_not_a_job(body, content_type):
    with pytest.raises(SpecError) as refused:  # the handler answers a SpecError 400, naming its field
        read_body(body, content_type)
    assert refused.value.field == "body"
    assert "not a job" in refused.value.message and "text/plain" in refused.value.message


@pytest.mark.parametrize(("body", "content_type"), [
    (b"echo hi", "text/plain"),
    (b"echo hi", "text/x-shellscript"),
    (b"#!/bin/bash\necho hi\n", "application/yaml"),
    (b"#!/bin/bash\necho hi\n", ""),
    (b"echo a\n#SBATCH --gres=gpu:1\necho hi\n", "application/octet-stream"),
])
def test_a_script_sent_or_read_as_one_is_a_batch_script(body, content_type):
    document = read_body(body, content_type)
    assert document == body.decode() and type(document) is str
    assert detect(document) == "sbatch"


def test_objects_stay_documents_whatever_the_content_type():
    assert read_body(b'{"command": "x", "tasks": [{"gpus": 1}]}', "text/plain") == {"command": "x", "tasks": [{"gpus": 1}]}
    assert read_body(b"command: x\ntasks:\n- gpus: 1\n", "application/yaml") == {"command": "x", "tasks": [{"gpus": 1}]}
