"""The rules of a submit that JSON Schema cannot state, in words, by the field a 400 names (the OpenAPI
document's ``x-rules``: field pattern -> rule). They relate two fields (task names unique, min_gpus <=
max_gpus) or depend on this server (its VCs, GPU types, cells, launcher, limits). tests/server/api/test_fuzz.py
accepts a 400 for schema-valid input only when it names one of these."""

from __future__ import annotations

JOB_RULES: dict[str, str] = {
    r"(tasks\[\d+\]\.)?command": "a command for the job or for each task, none with a notebook (it runs the notebook)",
    r"tasks\[\d+\]\.name": "task names are unique within a job",
    r"tasks\[\d+\]\.gpus": "a share of a GPU (0.5, 0.25, 0.125) is the job's one task (count 1); the tasks fit this "
                           "cluster's GPUs; an elastic job's gpus lie in min_gpus..max_gpus",
    r"tasks\[\d+\]\.gpu_type": "a GPU type this cluster has",
    r"tasks\[\d+\]\.gpu_memory_mb": "only with a share of a GPU, at most that share's memory",
    r"tasks\[\d+\]\.(min_failed|min_succeeded)": "at most the group's count",
    r"tasks\[\d+\]\.(cpus|memory_mb|count)": "a task without GPUs asks for cpus > 0; a task fits one node",
    r"tasks": "an elastic job has one task of count 1; the tasks fit this cluster",
    r"within|pinned_cell": "a cell of the job's VC (a share of a GPU takes no within)",
    r"min_gpus|max_gpus": "both or neither, min_gpus <= max_gpus",
    r"files": "relative paths inside the working dir, not output, checkpoint or under logs/, no two naming one file, "
              "none both a file and a directory, at most 1 MiB in all",
    r"working_dir|output_dir|data_dir": "a directory inside the job's own, not under logs/ nor a staged file",
    r"notebook(\..+)?": "notebook.file is one of files and ends in .ipynb; parameters are JSON values",
    r"env": "names of letters, digits and _, none that hive-lab sets (HIVE_*, CUDA_VISIBLE_DEVICES, RANK, ...)",
    r"vc|priority|time_limit_s|max_retries": "a VC the caller may use, within its limits (docs/limits.md)",
    r"image|kind|job_type|checkpoint": "what this server's launcher and policy support (an image needs a container "
                                       "launcher or no_image=true; a job_type one with known throughputs)",
    r"depends_on(\[\d+\])?(\..+)?|after": "jobs that exist, that the caller may see, not the job itself",
    r"source(\..+)?": "set by the server for a file in another format; no text in it holds a NUL",
    r"(jobName|taskRoles(\[\d+\])?(\..+)?|jobEnvs|extras|virtualCluster|gpuType|retryCount)": "as for the JobSpec "
        "fields they become (docs/formats.md); task role names are unique",
}
ARRAY_RULES: dict[str, str] = {
    **JOB_RULES,
    r"array|sweep": "array: indices, ranges and %throttle; sweep: lists of values; 1..10000 elements in all",
}
SCHEDULE_RULES: dict[str, str] = {
    r"cron": "each field within its range (minute 0-59, hour 0-23, day 1-31, month 1-12, weekday 0-7), cronsim's "
             "syntax",
    r"timezone": "an IANA time zone this server knows",
    r"job\.depends_on|job\.after": "a recurring job's runs depend on no fixed jobs",
    **{rf"job(\.({pattern}))?": rule for pattern, rule in JOB_RULES.items()},
}

PAGE_RULES: dict[str, str] = {r"after": "not with a non-zero offset (the cursor replaces it)"}
