"""A recurring job's script that will not be there when it runs (issue 40, 5).

Every run starts in its own new directory (HIVE_WORKING_DIR) holding only the files staged with the
job, so ``python grade.py`` with no ``grade.py`` staged fails at every due time, usually at night. A
schedule is refused at once instead. Only what can be known from the spec is judged: a relative
script path given to a known interpreter (or run as ``./x``), no shell expansions; a job with an image
is not judged (the image may hold the script).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

INTERPRETERS = re.compile(r"(python[0-9.]*|bash|sh|zsh|dash|Rscript|julia|perl|ruby|node)")
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}
# options of an interpreter that take the next word (so it is not the script)
TAKES_VALUE = {"-W", "-X", "-o", "-O", "--rcfile", "--init-file"}
# options after which no script file follows (a module, inline code)
NO_SCRIPT = {"-m", "-c", "-e", "--eval", "--version", "-V", "--help", "-h"}


def _words(command: str) -> list[list[str]] | None:
    """The simple commands of ``command`` as word lists; None when it is not plain enough to judge."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return None
    commands, current = [], []
    for token in tokens:
        if token in SEPARATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def _script(words: list[str]) -> str | None:
    """The script file a simple command runs, if it names one."""
    while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]) or words[0] in ("exec", "env", "time")):
        words = words[1:]
    if not words:
        return None
    program = words[0]
    if program.startswith("./"):
        return program
    if not INTERPRETERS.fullmatch(posixpath.basename(program)):
        return None
    rest = words[1:]
    while rest and rest[0].startswith("-"):
        if rest[0] in NO_SCRIPT:
            return None
        rest = rest[2:] if rest[0] in TAKES_VALUE else rest[1:]
    return rest[0] if rest else None


def missing_script(spec: Any) -> tuple[str, str] | None:
    """(field, sentence) for the first script a run of ``spec`` (a JobSpec) would not find, else None."""
    if spec.image is not None or spec.notebook is not None:
        return None
    staged = {posixpath.normpath(path) for path in spec.files}
    base = spec.working_dir or "."
    commands = [("command", spec.command)] + [(f"tasks[{i}].command", t.command) for i, t in enumerate(spec.tasks)]
    for field, command in commands:
        for words in _words(command or "") or []:
            script = _script(words)
            if not script or script.startswith(("/", "~")) or any(c in script for c in "$`*?["):
                continue
            if posixpath.normpath(posixpath.join(base, script)) in staged:
                continue
            return field, (f"{field}: {script} is not staged with the job, and each run starts in its own new "
                           f"directory, so the run would not find it; stage it (hive-lab schedules add --file "
                           f"{script} ...; in Python: files={{'{script}': open('{script}').read()}}), or give "
                           f"its absolute path")
    return None
