"""``rich`` renderings of jobs, VCs and the cluster for the CLI and terminal IPython."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .format import LENT_GPUS
from .widgets.shaping import gpu_state, job_rows, vc_rows

STATE_STYLES = {"running": "green", "queued": "yellow", "submitted": "yellow", "scheduled": "cyan",
                "succeeded": "dim green", "failed": "red", "cancelled": "dim"}
GPU_GLYPHS = {"free": ("·", "dim"), "used": ("■", "green"), "opportunistic": ("■", "magenta"),
              "reserved": ("▣", "yellow"), "bad": ("✖", "red"), "drained": ("○", "dim")}


REASON_MIN = 24  # below this the reason column would say nothing readable: its lines go under the table


class JobsTable(Table):
    """The jobs table, whose reasons are never dropped: where the terminal leaves the ``reason / where``
    column too little room (rich then squeezes it out entirely), the table is drawn without it and each
    job's reason follows as a line of its own (``j-000002  waiting for 4 GPUs in VC cv-101 (2 free)``)."""

    def __init__(self, *args, fields: Table, reasons: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields = fields
        self.reasons = reasons

    def __rich_console__(self, console, options):
        need = console.measure(self.fields, options=options).maximum
        if not self.reasons or options.max_width - need >= REASON_MIN + 3:
            yield from super().__rich_console__(console, options)
            return
        yield self.fields
        width = max(len(job_id) for job_id, _ in self.reasons)
        for job_id, reason in self.reasons:
            line = Text(f" {job_id:<{width}}  ", style="bold")
            line.append(reason)
            yield line


def jobs_table(jobs: list[dict], title: str | None = None, me: str | None = None) -> Table:
    """Jobs as a table; the reason column takes what width is left, and when too little is left the
    reasons go under the table (JobsTable): a row never loses its reason."""
    id_width = max([len(j.get("id", "")) for j in jobs] + [3])
    rows = job_rows(jobs, me)

    def fields_table(table: Table) -> Table:
        for column in ("job", "name", "state", "GPUs", "VC", "user", "prio", "age", "limit", "starts"):
            # an id is what people copy into the next command: never cut (80-column terminals included)
            table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=24 if column == "name" else None,
                             min_width=id_width if column == "job" else None)
        return table

    def cells(row: dict) -> list:
        return [row["id"], row["name"], Text(row["state"], style=STATE_STYLES.get(row["state"], "")),
                str(row["gpus"]), row["vc"], row["user"], row["priority"], row["age"], row["limit"], row["estimate"]]

    style = dict(title=title, expand=False, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    fields = fields_table(Table(**style))
    table = fields_table(JobsTable(fields=fields, reasons=[(r["id"], r["reason"]) for r in rows if r["reason"]],
                                   **style))
    table.add_column("reason / where", overflow="fold", ratio=1, min_width=16)
    for row in rows:
        fields.add_row(*cells(row))
        table.add_row(*cells(row), row["reason"])
    if not jobs:
        table.caption = fields.caption = "no jobs"
    return table


def what_if_table(answers: list[dict]) -> Table:
    """Dry-run answers side by side, one column per variant (e.g. 2 GPUs vs 4 GPUs)."""
    from .format import limit_text, placement_text, when_text

    table = Table(title="what if (nothing was submitted)", header_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("")
    for a in answers:
        table.add_column(f"{a.get('gpus', '?')} GPUs", overflow="fold")
    rows = [
        ("outcome", lambda a: {"start": "starts now", "preempt": "preempts", "wait": "waits",
                               "refused": "never fits"}.get(a.get("outcome"), "?")),
        ("where", lambda a: placement_text(a.get("placement")) or "-"),
        ("preempts", lambda a: ", ".join(a.get("preempts") or []) or "-"),
        ("estimated start", lambda a: when_text(a.get("estimated_start"))),
        ("time limit", lambda a: limit_text(a.get("time_limit_s"))),
        ("reason", lambda a: a.get("reason") or "-"),
    ]
    for label, cell in rows:
        table.add_row(label, *[cell(a) for a in answers])
    return table


def vcs_table(vcs: list[dict]) -> Table:
    table = Table(title="virtual clusters", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("VC", "guaranteed", "used", LENT_GPUS, "bad", "running", "queued", "usage", "yours"):
        table.add_column(column, justify="right" if column not in ("VC", "usage") else "left")
    for row in vc_rows(vcs):
        table.add_row(row["name"], str(row["guaranteed"]), str(row["used"]), str(row["borrowed"]),
                      str(row["doomed"]), str(row["running"]), str(row["queue"]), usage_bar(row),
                      "yes" if row["mine"] else "")
    return table


def usage_bar(row: dict, width: int = 20) -> Text:
    """``███████░░░░ ▒▒`` used within guarantee, rest of guarantee, opportunistic."""
    used = round(width * row["used_pct"] / 100) + round(width * row["over_pct"] / 100)
    guaranteed = round(width * row["guaranteed_pct"] / 100)
    lent = round(width * row["borrowed_pct"] / 100)
    text = Text()
    text.append("█" * used, style="green")
    text.append("░" * max(guaranteed - used, 0), style="dim")
    text.append("▒" * lent, style="magenta")
    return text


def cluster_grid(cluster: dict, max_gpus: int = 4096) -> Group:
    """One character per GPU, one line per node (summary only above ``max_gpus``)."""
    gpus = cluster.get("gpus") or []
    title = f"cluster: {cluster.get('gpus_free', '?')} of {cluster.get('gpus_total', len(gpus))} GPUs free"
    heading = Text(title, style="bold")
    table = Table(show_header=False, box=None, padding=(0, 1))
    table.add_column("node", style="bold")
    table.add_column("GPUs")
    if len(gpus) > max_gpus:
        counts: dict[str, int] = {}
        for g in gpus:
            counts[gpu_state(g)] = counts.get(gpu_state(g), 0) + 1
        table.add_row("", ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return Group(heading, table)
    by_node: dict[str, list[dict]] = {}
    for g in gpus:
        by_node.setdefault(str(g.get("node")), []).append(g)
    for node, node_gpus in by_node.items():
        line = Text()
        for g in node_gpus:
            glyph, style = GPU_GLYPHS[gpu_state(g)]
            line.append(glyph, style=style)
        table.add_row(node, line)
    legend = Text(" ")
    for state, (glyph, style) in GPU_GLYPHS.items():
        legend.append(glyph, style=style)
        legend.append(f" {state}  ")
    return Group(heading, table, legend)


def overview(client, all_jobs: bool = True, limit: int = 30) -> Group:
    cluster = client.cluster()
    vcs = client.vcs()
    jobs = client.jobs_page(user=None if all_jobs else "me", state="submitted,queued,scheduled,running",
                            limit=limit)
    table = jobs_table(jobs.get("jobs", []), title=f"queue ({jobs.get('total', 0)} active jobs)")
    return Group(cluster_grid(cluster), vcs_table(vcs), table)


def console(**kwargs) -> Console:
    """A console that is wide enough for the tables when the output is not a terminal (pipes, logs)."""
    c = Console(**kwargs)
    if not c.is_terminal and "width" not in kwargs:
        c = Console(width=140, **kwargs)
    return c


def print_table(renderable) -> None:
    console().print(renderable)


def print_overview(client) -> None:
    console().print(overview(client))
