"""Whatever a file in another platform's format holds, reading it ends in a JobSpec or a SpecError (a
400 naming the field), never another exception (a 500): property tests over the shapes of each format
with arbitrary values where the fields are."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hive_lab_server.api import formats
from hive_lab_server.wire.spec import JobSpec, SpecError

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 2000), st.floats(allow_nan=False, width=32),
                    st.text(max_size=12), st.sampled_from(["", "default", "x", "0", "1Gi", "500m", "gpu:2", "-2"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)


def fields(names, extra=values, **shaped):
    """Dicts with some of ``names``, each an arbitrary value, or (for ``shaped``) a value of its own shape."""
    value = {n: st.one_of(shaped[n], extra) if n in shaped else extra for n in names}
    return st.lists(st.sampled_from(names), max_size=len(names), unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: value[k] for k in keys}))


V1_ROLE = st.one_of(scalars, fields(
    ["name", "taskNumber", "cpuNumber", "memoryMB", "shmMB", "gpuNumber", "portList", "command",
     "minFailedTaskCount", "minSucceededTaskCount", "gpuType"],
    name=st.sampled_from(["w", "ps_server"]), command=st.just("x"), taskNumber=st.integers(0, 3),
    gpuNumber=st.sampled_from([0, 1, 0.5, 2.5]), portList=st.lists(fields(["label", "beginAt", "portNumber"]), max_size=2)))
V1 = st.builds(lambda top, roles: {**top, "jobName": "j", "taskRoles": roles},
               fields(["jobName", "image", "dataDir", "outputDir", "codeDir", "virtualCluster", "retryCount",
                       "jobEnvs", "extras", "gpuType", "killAllOnCompletedTaskNumber"]),
               st.one_of(values, st.lists(V1_ROLE, max_size=3)))
V2_ROLE = fields(["instances", "completion", "taskRetryCount", "dockerImage", "data", "output", "script",
                  "extraContainerOptions", "resourcePerInstance", "commands"],
                 resourcePerInstance=fields(["cpu", "memoryMB", "gpu", "ports"]),
                 dockerImage=st.just("img"), commands=st.lists(st.text(max_size=20), max_size=2),
                 completion=fields(["minFailedInstances", "minSucceededInstances"]))
PREREQS = st.lists(st.one_of(st.just({"name": "img", "type": "dockerimage", "uri": "u"}),
                             fields(["name", "type", "uri", "auth"])), max_size=3)
V2 = st.builds(lambda top, roles: {**top, "protocolVersion": 2, "name": "n", "type": "job", "taskRoles": roles,
                                   "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "u"},
                                                     *(top.get("prerequisites") or [])]
                                   if isinstance(top.get("prerequisites"), list) else top.get("prerequisites")},
               fields(["name", "type", "prerequisites", "parameters", "secrets", "jobRetryCount", "deployments",
                       "defaults", "extras"], prerequisites=PREREQS, type=st.just("job"), name=st.just("n"),
                      extras=fields(["hivedScheduler", "com.microsoft.pai.runtimeplugin", "gangAllocation"]),
                      defaults=fields(["virtualCluster", "deployment"])),
               st.one_of(values, st.dictionaries(st.sampled_from(["worker", "ps", "a-b"]),
                                                 st.one_of(V2_ROLE, scalars), max_size=2)))
CONTAINER = st.builds(lambda c: {**c, "image": "i", "command": ["x"]}, fields(["name", "args", "resources", "env"],
                   resources=fields(["limits", "requests"], limits=fields(["nvidia.com/gpu", "nvidia.com/gpucores",
                                                                          "nvidia.com/gpumem", "cpu", "memory"]),
                                    requests=fields(["cpu", "memory", "nvidia.com/gpu"]))))
POD = st.builds(lambda p, c: {**p, "containers": c}, fields(["restartPolicy", "volumes"]),
                st.lists(CONTAINER, min_size=1, max_size=2))
K8S = st.builds(lambda kind, spec: {**kind, "metadata": {"name": "x"}, "spec": spec},
                st.sampled_from([{"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "batch/v1", "kind": "Job"},
                                 {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}]),
                st.one_of(POD, fields(["template", "parallelism", "completions", "backoffLimit", "tasks", "queue",
                                       "minAvailable", "activeDeadlineSeconds"],
                                      template=st.fixed_dictionaries({"spec": POD}),
                                      tasks=st.lists(st.one_of(scalars, fields(["name", "replicas", "template"],
                                                     template=st.fixed_dictionaries({"spec": POD}))), max_size=2))))
SBATCH_LINES = st.lists(st.one_of(
    st.builds(lambda o, v: f"#SBATCH {o}={v}", st.sampled_from(["--nodes", "--ntasks", "--gres", "--gpus", "--mem",
                                                               "--time", "--cpus-per-task", "--gpus-per-task",
                                                               "--partition", "--ntasks-per-node", "-J"]),
              st.text(alphabet="0123456789:-gpuGKMTa,.x", max_size=8)),
    st.sampled_from(["#SBATCH -N", "#SBATCH --exclusive", "#SBATCH \"unclosed", "echo hi", "#SBATCH --gres gpu:a:b:c"])),
    max_size=6)


def _read(doc):
    try:
        assert isinstance(formats.from_document(doc, seal=lambda v: {k: "sealed" for k in v}), JobSpec)
    except SpecError as exc:
        assert exc.message


@settings(max_examples=300, deadline=None)
@given(st.one_of(V1, V2, K8S))
@example({"protocolVersion": 2, "name": "n", "type": "job", "defaults": {"deployment": {}},  # found by a random draw
          "taskRoles": {"w": {}}})
def test_any_document_is_a_jobspec_or_a_spec_error(doc):
    _read(doc)


@settings(max_examples=200, deadline=None)
@given(SBATCH_LINES)
def test_any_sbatch_script_is_a_jobspec_or_a_spec_error(lines):
    _read("#!/bin/bash\n" + "\n".join(lines) + "\npython x.py\n")
