"""Queue view: a sortable table of jobs with cancel buttons for the viewer's own jobs and details on click."""

from __future__ import annotations

import html

import ipywidgets as W

from ..format import status_line, utcnow
from .base import LiveView, error_html
from .shaping import COLUMNS, job_rows, merge_job, sort_rows

HEADERS = {"id": "job", "name": "name", "state": "state", "reason": "wait reason / where", "gpus": "GPUs",
           "vc": "VC", "user": "user", "priority": "priority", "age": "age"}
WIDTHS = {"id": "90px", "name": "minmax(80px,1fr)", "state": "80px", "reason": "minmax(160px,3fr)",
          "gpus": "70px", "vc": "90px", "user": "80px", "priority": "85px", "age": "80px"}
STATE_STYLE = {"running": "#2ca02c", "queued": "#ff9f1c", "submitted": "#ff9f1c", "scheduled": "#1f77b4",
               "failed": "#d62728", "cancelled": "#7f7f7f", "succeeded": "#555"}
ACTIVE = ("submitted", "queued", "scheduled", "running")


class QueueView(LiveView):
    refetch_on = ("hello", "snapshot")  # job events are applied directly, without a refetch

    def __init__(self, client=None, *, all_users: bool = False, states: list[str] | None = None,
                 live: bool = True, jobs: list[dict] | None = None, me: dict | None = None,
                 max_rows: int = 200, vc: str | None = None, clock=None, **kwargs):
        super().__init__(client, live=live, **kwargs)
        self.clock = clock or utcnow  # ages are computed against it (tests inject a fixed one)
        self.all_users = all_users
        self.states = states
        self.vc = vc
        self.max_rows = max_rows
        self.me = me or {"user": None, "admin": False}
        self.jobs: list[dict] = []
        self.rows: list[dict] = []
        self.sort_column, self.sort_descending = "state", False
        self.title = W.HTML()
        self.scope = W.ToggleButtons(options=[("mine", False), ("everyone", True)], value=all_users,
                                     style={"button_width": "80px"})
        self.scope.observe(self._scope_changed, names="value")
        self.grid = W.GridBox(layout=W.Layout(
            grid_template_columns=" ".join(WIDTHS[c] for c in COLUMNS) + " 70px",
            grid_gap="2px 6px", align_items="center", overflow="auto", max_height="420px"))
        self.details = W.HTML()
        self.widget = W.VBox([W.HBox([self.title, self.scope]), self.grid, self.details])
        self.header_buttons = {}
        for column in COLUMNS:
            button = W.Button(description=HEADERS[column], layout=W.Layout(width="auto"),
                              tooltip=f"sort by {HEADERS[column]}")
            button.on_click(lambda _b, c=column: self.sort_by(c))
            self.header_buttons[column] = button
        self.cancel_buttons: dict[str, W.Button] = {}
        self._render_rows()
        if jobs is not None:
            self.set_jobs(jobs)
        elif self.client is not None:
            self.start()

    # data ------------------------------------------------------------------------------------------
    def fetch(self):
        me = self.client.me()
        user = None if self.all_users else "me"
        page = self.client.jobs_page(user=user, vc=self.vc, state=self.states, limit=self.max_rows)
        return me, page.get("jobs", []), page.get("total", 0)

    def render(self, data) -> None:
        me, jobs, total = data
        self.me = me
        self.total = total
        self.set_jobs(jobs)

    def set_jobs(self, jobs: list[dict]) -> None:
        self.jobs = list(jobs)
        self._reshape()

    def on_event(self, message: dict) -> None:
        if message.get("type") == "job" and isinstance(message.get("job"), dict):
            job = message["job"]
            if not self.all_users and self.me.get("user") and job.get("user") != self.me["user"]:
                return
            if self.vc and job.get("vc") != self.vc:
                return
            if self.states and job.get("state") not in self.states:
                self.jobs = [j for j in self.jobs if j.get("id") != job.get("id")]
            else:
                self.jobs = merge_job(self.jobs, job)[: self.max_rows]
            with self._render_lock:
                self._reshape()
            return
        super().on_event(message)

    def sort_by(self, column: str) -> None:
        if column == self.sort_column:
            self.sort_descending = not self.sort_descending
        else:
            self.sort_column, self.sort_descending = column, column == "age"
        self._reshape()

    def _reshape(self) -> None:
        rows = job_rows(self.jobs, self.me.get("user"), bool(self.me.get("admin")), now=self.clock())
        self.rows = sort_rows(rows, self.sort_column, self.sort_descending)
        self._render_rows()

    # rendering -------------------------------------------------------------------------------------
    def _render_rows(self) -> None:
        for column, button in self.header_buttons.items():
            arrow = (" ▼" if self.sort_descending else " ▲") if column == self.sort_column else ""
            button.description = HEADERS[column] + arrow
        children: list[W.Widget] = list(self.header_buttons.values()) + [W.HTML("<b>action</b>")]
        cancel_buttons: dict[str, W.Button] = {}
        for row in self.rows:
            job_button = W.Button(description=row["id"], layout=W.Layout(width="auto"),
                                  tooltip="details and logs")
            job_button.on_click(lambda _b, job_id=row["id"]: self.show_details(job_id))
            children.append(job_button)
            for column in COLUMNS[1:]:
                text = html.escape(str(row[column]))
                if column == "state":
                    text = f'<b style="color:{STATE_STYLE.get(row["state"], "#000")}">{text}</b>'
                children.append(W.HTML(f'<span title="{html.escape(str(row[column]))}">{text}</span>'))
            if row["cancellable"]:
                cancel = W.Button(description="cancel", button_style="danger", layout=W.Layout(width="auto"))
                cancel.on_click(lambda _b, job_id=row["id"]: self.cancel(job_id))
                cancel_buttons[row["id"]] = cancel
                children.append(cancel)
            else:
                children.append(W.HTML(""))
        self.grid.children = children
        self.cancel_buttons = cancel_buttons
        active = sum(1 for r in self.rows if r["state"] in ACTIVE)
        who = "everyone's" if self.all_users else "my"
        self.title.value = f"<b>{len(self.rows)} of {who} jobs</b> ({active} active)"

    def lab_view(self) -> dict:
        return {"view": "jobs", "all": self.all_users, "states": self.states, "vc": self.vc, "limit": self.max_rows}

    def snapshot_html(self) -> str:
        return snapshot_table(self.rows, "everyone's" if self.all_users else "my", self.clock())

    def cancel(self, job_id: str) -> None:
        try:
            job = self.client.cancel(job_id)
        except Exception as exc:  # noqa: BLE001 - shown to the user
            self.details.value = error_html(f"cancel {job_id}: {exc}")
            return
        self.jobs = merge_job(self.jobs, job)
        self._reshape()
        self.details.value = html.escape(status_line(job))

    def show_details(self, job_id: str) -> None:
        try:
            job = self.client.job(job_id)
            log_tail = ""
            if job.get("user") == self.me.get("user") or self.me.get("admin"):
                try:
                    log_tail = self.client.log_text(job_id)[-4000:]
                except Exception as exc:  # noqa: BLE001 - no log yet or not ours
                    log_tail = f"(no log: {exc})"
        except Exception as exc:  # noqa: BLE001
            self.details.value = error_html(f"{job_id}: {exc}")
            return
        self.details.value = details_html(job, log_tail)

    def show_error(self, message: str) -> None:
        self.title.value = error_html(message)

    def _scope_changed(self, change) -> None:
        self.all_users = change["new"]
        if self.client is not None:
            self.refresh()


def snapshot_table(rows: list[dict], whose: str, now) -> str:
    """The rows as a static table, stamped "as of" ``now``: read in a saved notebook, it says when."""
    head = "".join(f"<th style='text-align:left'>{html.escape(HEADERS[c])}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(str(row[c]))}</td>" for c in COLUMNS)
                   + "</tr>" for row in rows)
    from ..format import when_text

    stamp = when_text(now)
    return (f"<div><b>{len(rows)} of {whose} jobs</b> as of {stamp} (a snapshot: open the notebook in "
            f"JupyterLab with hive-lab for the live view)<table>{head and '<tr>' + head + '</tr>'}{body}</table></div>")


def details_html(job: dict, log_tail: str = "") -> str:
    """Job details (status, history with reasons, placement) and its log tail as HTML."""
    history = "".join(
        f"<tr><td>{html.escape(h.get('at', ''))}</td><td>{html.escape(h.get('state', ''))}</td>"
        f"<td>{html.escape(h.get('reason') or '')}</td></tr>" for h in job.get("history") or [])
    return (
        f"<div><b>{html.escape(status_line(job))}</b><br>"
        f"user {html.escape(str(job.get('user')))} · VC {html.escape(str(job.get('vc')))} · "
        f"priority {html.escape(str(job.get('priority')))} · retries {job.get('retries', 0)}/{job.get('max_retries', 0)}"
        f"<table style='font-size:12px'>{history}</table>"
        f"<pre style='max-height:240px;overflow:auto;background:#f6f6f6;padding:4px'>"
        f"{html.escape(log_tail)}</pre></div>"
    )
