"""The config files ``hive-lab course init`` owns, and the instructor's files next to them that it never rewrites.

An owned file (the service's ``hive_lab_config.py``, the Hub's ``jupyterhub_config.py``) is rewritten by
every run of init. Its first line is the mark, with a digest of the body init wrote; its last lines list
short ids of the lines init wrote; it ends by loading the instructor's local file
(``load_subconfig(<absolute path>)``: traitlets resolves it wherever the file is loaded from, the service's
``--config`` and ``hub_config.load`` alike), so a setting there wins.

Running init again:
- an owned file nobody edited (the digest matches) is replaced; init says which lines changed;
- an owned file edited by hand: the lines init did not write (not among the ids) are moved, in order, to
  the end of the local file, where they keep working, and init names each one (a block that does not
  compile on its own is moved commented out, and init says to merge it by hand);
- a file of an older init (a mark, no digest): the lines that set an option the new text does not set
  are taken as the instructor's and moved the same way;
- the local file is created once (0600) and only ever appended to by such a move.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import stat
from dataclasses import dataclass, field

MARK = "# written by `hive-lab course init`"
IDS_TAG = "# course init's lines:"
IDS_PER_LINE = 12
LOCAL_HEADER = """\
# your additions; `hive-lab course init` never rewrites this file.
# {owned} (which course init owns and rewrites each time it runs) loads this file last,
# so what you set here wins over what it sets, e.g.
#   {example}
"""
_DIGEST = re.compile(r" \[body digest ([0-9a-f]{16})\]$")
_OPTION = re.compile(r"^c\.(\w+)\.(\w+)\b")


def line_id(line: str) -> str:
    return hashlib.sha256(line.strip().encode()).hexdigest()[:8]


def body_digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def compose(head: str, body: str, local: pathlib.Path) -> str:
    """The owned file: the mark line (``head`` + digest), ``body``, the load of ``local``, the line ids."""
    body = body.rstrip("\n") + "\n\n" + (
        f"# your additions, in a file course init never rewrites: loaded last, so its settings win\n"
        f"load_subconfig({str(local)!r})  # noqa\n")
    lines = body.rstrip("\n").split("\n")
    ids = sorted({line_id(line) for line in lines if line.strip()})
    tail = [f"{IDS_TAG} {' '.join(ids[i:i + IDS_PER_LINE])}" for i in range(0, len(ids), IDS_PER_LINE)]
    return "\n".join([f"{head} [body digest {body_digest(lines)}]", *lines, *tail]) + "\n"


@dataclass
class Parsed:
    body: list[str]
    digest: str | None  # None: written by an older init (no digest)
    ids: set[str] = field(default_factory=set)

    @property
    def edited(self) -> bool:
        return self.digest is None or self.digest != body_digest(self.body)


def parse(text: str) -> Parsed:
    lines = text.rstrip("\n").split("\n")
    m = _DIGEST.search(lines[0]) if lines else None
    ids: set[str] = set()
    body = []
    for line in lines[1:]:  # (the ids lines wherever they are: lines may have been appended after them)
        if line.startswith(IDS_TAG):
            ids.update(line[len(IDS_TAG):].split())
        else:
            body.append(line)
    return Parsed(body, m.group(1) if m else None, ids)


def _option(line: str) -> tuple[str, str] | None:
    m = _OPTION.match(line.strip())
    return (m.group(1), m.group(2)) if m else None


def instructor_lines(old: Parsed, new_body: list[str]) -> list[str]:
    """The lines of an owned file that init did not write (empty when the file was not edited)."""
    if not old.edited:
        return []
    if old.digest is not None:
        return [line for line in old.body if line.strip() and line_id(line) not in old.ids]
    # an older init's file: lines setting an option the new text does not set are the instructor's
    ours = {_option(line) for line in new_body} | {None}
    new = {line.strip() for line in new_body}
    return [line for line in old.body if line.strip() and line.strip() not in new and not line.lstrip().startswith("#")
            and _option(line) not in ours]


def _compiles(text: str) -> bool:
    try:
        compile(text, "<local config>", "exec")
        return True
    except SyntaxError:
        return False


def write_private(path: pathlib.Path, text: str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``text`` (created ``mode``, never through a link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def ensure_local(local: pathlib.Path, owned: pathlib.Path, example: str) -> list[str]:
    """Create the instructor's file once (0600); never touch an existing one."""
    if local.exists() or local.is_symlink():
        return [f"kept: {local} (your additions; course init never rewrites it)"]
    write_private(local, LOCAL_HEADER.format(owned=owned.name, example=example))
    return [f"created once: {local} (0600): put your own settings there; course init never rewrites it"]


def _short(line: str, width: int = 150) -> str:
    line = line.strip()
    return line if len(line) <= width else line[: width - 3] + "..."


def update_owned(path: pathlib.Path, head: str, body: str, local: pathlib.Path, mode: int = 0o600) -> list[str]:
    """Write the owned file ``path`` (``head``: its mark line without the digest) keeping the instructor's
    edits (moved to ``local``); the sentences saying what changed. FileExistsError: a file there that init
    did not write (left alone)."""
    new_text = compose(head, body, local)
    new_body = parse(new_text).body
    if not path.exists():
        write_private(path, new_text, mode)
        return [f"created: {path} ({mode:04o})"]
    old_text = path.read_text(errors="replace")
    if MARK not in old_text.split("\n", 1)[0]:
        raise FileExistsError(f"{path} exists and was not written by `hive-lab course init`: move it away "
                              f"(or merge the printed text into it by hand) and run again")
    old = parse(old_text)
    # (a line loading the local file itself would make it load itself: init writes that one anyway)
    theirs = [line for line in instructor_lines(old, new_body) if str(local) not in line]
    report: list[str] = []
    if theirs:
        block = "\n".join(theirs) + "\n"
        existing = local.read_text(errors="replace") if local.exists() else ""
        note = f"\n# moved here from {path.name} by `hive-lab course init` (you had added or changed these lines there)\n"
        if not _compiles(existing + note + block):
            block = "".join(f"# {line}\n" for line in theirs)
            note = note[:-1] + ", commented out: they do not run on their own; merge them by hand)\n"
            report.append(f"WARNING: the lines you edited in {path} do not run on their own; they are in {local}, "
                          "commented out: merge them by hand")
        with open(local, "a") as f:
            f.write(note + block)
        os.chmod(local, 0o600)
        report.append(f"moved {len(theirs)} line(s) you had added or changed in {path} to {local} (loaded last, "
                      "so they still apply and win over what init writes; delete one there to take init's value again):")
        report += [f"    {_short(line)}" for line in theirs]
    ours_before = [line for line in old.body if line not in theirs]
    removed = [line for line in ours_before if line.strip() and line not in new_body]
    added = [line for line in new_body if line.strip() and line not in ours_before]
    if old_text == new_text and stat.S_IMODE(path.stat().st_mode) == mode:
        return [f"unchanged: {path}"]
    write_private(path, new_text, mode)
    if removed or added:
        report.insert(0, f"updated: {path} (-{len(removed)} +{len(added)} line(s))")
        report[1:1] = [f"  - {_short(line)}" for line in removed] + [f"  + {_short(line)}" for line in added]
    else:
        report.insert(0, f"rewritten: {path} (the same settings{'' if theirs else '; its mode is ' + f'{mode:04o}'})")
    return report
