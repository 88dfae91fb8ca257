"""After admission a job's spec is read through its typed view (``wire.launch_spec.LaunchSpec``, kept on the
running job as ``ActiveJob.spec``), never as a dict by string key (issue 39): a field's name and default
are written once, in the view, and a misspelt field is an AttributeError, not a silent ``None``.

Read from the source with ``ast`` (nothing is imported): in the server's modules, no subscript or ``.get``
of a spec: ``spec[...]``, ``spec.get(...)``, ``job.spec[...]``, ``job.spec.get(...)``, and the stored
row's ``row["spec"][...]``, ``row["spec"].get(...)``, ``(row.get("spec") or {}).get(...)``. Writes count
too (``spec["env"] = ...``): a changed spec is a new view (``LaunchSpec.with_gpus``, ``as_element``).

``NOT_A_JOB_SPEC`` lists the modules whose ``spec`` is another document, each with what it is. The view's
own module reads the stored dict by key, once, by another name (``_raw``): that is the one place.
"""

from __future__ import annotations

import ast
import pathlib

from test_import_graph import PACKAGES, REPO

SERVER = PACKAGES["hive_lab_server"]

# file (relative to the server package) -> what its ``spec`` is, when it is not a job's spec
NOT_A_JOB_SPEC = {
    "api/formats/kubernetes.py": "a Kubernetes Job's or Volcano Job's own `spec` (the user's manifest, translated "
                                 "into a JobSpec before validation)",
    "hardware/inventory.py": "a cell's spec in HiveD's physicalCluster (cellAddress, cellChildren) of the cluster config",
    "execution/slurm/inventory.py": "a VC's entry in the Slurm cluster config (gpus, gpu_type, cells)",
    "execution/isolation/task_exec.py": "the task wrapper's own message from the launcher (command, cwd, env), "
                                        "read by the wrapper process",
}


def _const(node: ast.AST, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def is_spec(node: ast.AST) -> bool:
    """``spec``, ``<x>.spec``, ``<x>["spec"]``, ``<x>.get("spec")`` or ``(<one of these> or {})``."""
    if isinstance(node, ast.Name):
        return node.id == "spec"
    if isinstance(node, ast.Attribute):
        return node.attr == "spec"
    if isinstance(node, ast.Subscript):
        return _const(node.slice, "spec")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and _const(node.args[0], "spec")
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return is_spec(node.values[0])
    return False


def _string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def spec_key_reads(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, expression) of each string-key subscript or ``.get`` of a spec in ``source`` (a slice of a
    string called ``spec`` is not one)."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Subscript) and is_spec(node.value) and _string(node.slice):
            out.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and is_spec(node.func.value) and node.args and _string(node.args[0])):
            out.append((node.lineno, ast.unparse(node)))
    return out


def server_spec_reads() -> list[str]:
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).as_posix()
        if rel in NOT_A_JOB_SPEC:
            continue
        found += [f"{rel}:{line}: {expr}" for line, expr in spec_key_reads(path.read_text(), str(path))]
    return found


def test_the_reader_finds_each_form():
    source = '\n'.join([
        'a = job.spec["tasks"]', 'b = spec.get("image")', 'c = row["spec"]["tasks"]', 'd = row["spec"].get("job_type")',
        'e = (row.get("spec") or {}).get("time_limit_s")', 'spec["env"] = env', 'f = j.spec["tasks"][0]["count"]',
        # not reads of a spec by key: the row's spec passed on whole, an attribute, another dict
        'g = row["spec"]', 'h = job.spec.tasks[0].gpus', 'i = other["tasks"]', 'k = spec_dict["tasks"]',
        'm = spec[len("fake:"):]',
    ])
    assert [expr for _, expr in spec_key_reads(source)] == [
        "job.spec['tasks']", "spec.get('image')", "row['spec']['tasks']", "row['spec'].get('job_type')",
        "(row.get('spec') or {}).get('time_limit_s')", "spec['env']", "j.spec['tasks']"]


def test_the_exempt_modules_exist_and_have_such_reads():
    """An entry of NOT_A_JOB_SPEC that names no file, or a file with nothing to exempt, goes."""
    for rel in NOT_A_JOB_SPEC:
        path = SERVER / rel
        assert path.is_file(), f"{rel} does not exist: drop it from NOT_A_JOB_SPEC"
        assert spec_key_reads(path.read_text()), f"{rel} reads no spec by key: drop it from NOT_A_JOB_SPEC"


def test_no_module_reads_a_job_spec_by_string_key():
    found = server_spec_reads()
    assert not found, ("a job's spec read by string key; read its typed view (ActiveJob.spec, or "
                       "LaunchSpec.of(row['spec']) for a stored row) instead:\n" + "\n".join(found))


def test_the_running_job_carries_the_typed_view():
    """``ActiveJob.spec`` is declared a ``LaunchSpec`` (the type the readers above rely on)."""
    tree = ast.parse((SERVER / "jobs" / "lifecycle" / "active.py").read_text())
    job = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ActiveJob")
    fields = {n.target.id: ast.unparse(n.annotation) for n in job.body
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert fields["spec"] == "LaunchSpec"
    assert REPO in SERVER.parents
