"""Spec building for %%submit and `hive-lab submit` (files staged, flags applied, clear errors)."""

import json

import pytest

from hive_lab.cli import build_parser
from hive_lab.cli.submit import build_spec
from hive_lab.errors import BadRequest
from hive_lab.submission import CELL_FILE, cell_spec, collect_files, parse_priority


def test_cell_spec_stages_code_and_files(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "util.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "junk.py").write_text("")
    files = collect_files(["data.csv,pkg"], tmp_path)
    assert files == {"data.csv": "a,b\n1,2\n", "pkg/util.py": "X = 1\n"}
    spec = cell_spec("print(1)", gpus=2, gpu_type="A100", vc="research", priority="opportunistic",
                     name="t", tasks=2, files=files, local_python="/usr/bin/python3")
    assert spec["files"][CELL_FILE] == "print(1)" and spec["files"]["pkg/util.py"] == "X = 1\n"
    assert spec["tasks"] == [{"name": "main", "count": 2, "gpus": 2, "gpu_type": "A100"}]
    assert spec["priority"] == "opportunistic" and spec["vc"] == "research" and spec["kind"] == "batch"
    assert CELL_FILE in spec["command"] and "/usr/bin/python3" in spec["command"]
    assert "python3" in cell_spec("x", image="python:3.12")["command"]


def test_bad_files_and_priorities_say_what_to_fix(tmp_path):
    with pytest.raises(BadRequest, match="missing.txt does not exist"):
        collect_files(["missing.txt"], tmp_path)
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(BadRequest, match="not UTF-8 text"):
        collect_files(["blob.bin"], tmp_path)
    with pytest.raises(BadRequest, match="integer 0..1000 or 'opportunistic'"):
        parse_priority("high")
    with pytest.raises(BadRequest, match="--tasks must be at least 1"):
        cell_spec("x", tasks=0)


def _args(argv):
    return build_parser().parse_args(["submit"] + argv)


def test_cli_spec_file_and_flags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: base\nvc: research\ncommand: python train.py\n"
                    "tasks: [{name: worker, count: 1, gpus: 1}]\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    out = build_spec(_args([str(spec), "--gpus", "4", "--tasks", "2", "--priority", "5",
                            "--env", "A=1", "--file", "train.py", "--name", "flags"]))
    assert out["name"] == "flags" and out["vc"] == "research" and out["priority"] == 5
    assert out["tasks"] == [{"name": "worker", "count": 2, "gpus": 4}]
    assert out["env"] == {"A": "1"} and out["files"] == {"train.py": "print('hi')\n"}
    out = build_spec(_args(["--gpus", "1", "--", "python", "-c", "print(1)"]))
    assert out["command"] == "python -c 'print(1)'" and out["tasks"][0]["gpus"] == 1
    (tmp_path / "pai.json").write_text(json.dumps({"jobName": "p", "taskRoles": [{"name": "a", "taskNumber": 1}]}))
    assert build_spec(_args([str(tmp_path / "pai.json"), "--vc", "x"]))["vc"] == "x"
    with pytest.raises(BadRequest, match="OpenPAI"):
        build_spec(_args([str(tmp_path / "pai.json"), "--gpus", "2"]))
    with pytest.raises(BadRequest, match="no command"):
        build_spec(_args(["--gpus", "1"]))
    (tmp_path / "bad.yaml").write_text("- a\n- b\n")
    with pytest.raises(BadRequest, match="must hold a mapping"):
        build_spec(_args([str(tmp_path / "bad.yaml")]))


def test_default_names_come_from_the_cell_or_the_command():
    """Issue 8: lists full of ``cell [4]`` and ``job [3]``: without --name a job is named after the cell's
    first comment, else the notebook, else 'cell'; the CLI's after the script it runs."""
    from hive_lab.submission import cell_name, cell_spec, command_name

    assert cell_name("# train resnet on CIFAR\nimport torch\n") == "train resnet on CIFAR"
    assert cell_name("\n#   tune   the lr  \n# more words\nx = 1") == "tune the lr"
    assert cell_name("#!/usr/bin/env python\n#\n# second line\n") == "second line"
    assert cell_name("x = 1  # not a title\n# below the code", "/home/ann/resnet-sweep.ipynb") == "resnet-sweep"
    assert cell_name("x = 1") == "cell"
    assert len(cell_name("# " + "word " * 40)) == 60
    assert cell_spec("# fit the model\nprint(1)")["name"] == "fit the model"
    assert cell_spec("# fit the model\nprint(1)", name="given")["name"] == "given"
    assert command_name("python -u train.py --lr 0.1") == "train.py"
    assert command_name("bash scripts/run.sh") == "run.sh"
    assert command_name("/usr/bin/nvidia-smi -L") == "nvidia-smi"
    assert command_name("") is None and command_name(None) is None
