/**
 * `%hive_jobs` and `%hive_status` outputs, rendered by the extension instead of the kernel.
 *
 * The magics display a bundle holding an ipywidget (for frontends without this extension) and
 * `application/vnd.hive-lab.view+json`: which view and its filter, nothing else. Here that mime type
 * ranks before the widget's, so JupyterLab and Notebook 7 draw the view from the server's REST API and
 * event stream (the panel's one ClusterModel): it stays live across kernel restarts, shutdowns and
 * reopened notebooks, where a widget says "Error displaying widget: model not found".
 */
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { ACTIVE_STATES, arrayCountsText, IArray, IJob, IVc } from './api';
import { embedChart } from './bokehjs';
import { HeatmapWidget } from './heatmap';
import { age, ClusterModel, sortJobs } from './model';
import { capitalized, estimateText, gpusText, LENT_GPUS, placementText, statusLine } from './format';
import { el } from './dom';

export const VIEW_MIME = 'application/vnd.hive-lab.view+json';

/** Before ipywidgets' widget view (-10): the extension's view is the one drawn where both exist. */
export const VIEW_RANK = -20;

/** What the kernel put in the bundle (hive_lab.widgets.base.LiveView.lab_view). */
export interface IViewRequest {
  view: 'jobs' | 'status' | 'job' | 'array';
  /** view "job" (a %%submit cell's line): the job; view "array" (a %%submit --array/--sweep cell): the array */
  id?: string;
  /** view "array": whether every element had ended when the kernel drew it */
  ended?: boolean;
  /** view "array": the results' charts, Bokeh's JSON as a string (hive_lab/array_charts.py), null without any */
  chart?: string | null;
  all?: boolean;
  states?: string[] | null;
  vc?: string | null;
  limit?: number;
}


/** The %%submit line's icon colours (job_monitor.STATE_COLORS). */
const STATE_COLORS: Record<string, string> = {
  running: '#2ca02c',
  succeeded: '#2ca02c',
  failed: '#d62728',
  cancelled: '#7f7f7f'
};

/** The %%submit line's icon (job_monitor.status_html's). */
function stateIcon(state: string): string {
  if (state === 'succeeded') {
    return '✔';
  }
  if (state === 'failed' || state === 'cancelled') {
    return '✖';
  }
  return state === 'running' ? '▶' : '◷';
}

/** An array's line (hive_lab.format.array_line's words, the panel's count order). */
export function arrayLine(array: IArray): string {
  const throttle = array.throttle ? `, at most ${array.throttle} at once` : '';
  const held = array.held ? ' (paused)' : '';
  const reason = array.reason ? `; ${array.reason}` : '';
  return `${array.id} ${array.name} [${array.count} elements${throttle}]: ${array.state}${held}: ${arrayCountsText(array.counts)}${reason}`;
}

/**
 * A click on a header sorts the rows by that column (numbers as numbers, run times by their seconds,
 * empty cells last); a second click reverses. The table arrives sorted by its first metric.
 */
export function sortableTable(table: HTMLTableElement): void {
  const headers = Array.from(table.querySelectorAll('thead th'));
  headers.forEach((th, column) => {
    th.setAttribute('title', 'Sort by this column');
    th.addEventListener('click', () => {
      const descending = th.getAttribute('data-sorted') === 'asc';
      headers.forEach(h => h.removeAttribute('data-sorted'));
      th.setAttribute('data-sorted', descending ? 'desc' : 'asc');
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const key = (row: HTMLTableRowElement): number | string | null => {
        const text = (row.cells[column]?.textContent ?? '').trim();
        if (!text) {
          return null;
        }
        const seconds = runTimeSeconds(text);
        if (seconds !== null) {
          return seconds;
        }
        const n = Number(text);
        return Number.isNaN(n) ? text : n;
      };
      rows.sort((a, b) => {
        const x = key(a);
        const y = key(b);
        if (x === null || y === null) {
          return x === y ? 0 : x === null ? 1 : -1;
        }
        const order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
        return descending ? -order : order;
      });
      body.append(...rows);
    });
  });
}

/** `3.2 s`, `4 min 05 s`, `2 h 03 min`, `3 d 4 h` (hive_lab.format.duration) in seconds; null for other text. */
function runTimeSeconds(text: string): number | null {
  const match = /^(?:(\d+) d )?(?:(\d+) h ?)?(?:(\d+) min ?)?(?:([\d.]+) s)?$/.exec(text);
  if (!match || !match.slice(1).some(Boolean)) {
    return null;
  }
  const [d, h, m, s] = match.slice(1).map(v => Number(v ?? 0));
  return ((d * 24 + h) * 60 + m) * 60 + s;
}

/** Where a job runs, or why it waits: the panel's words. */
function whereOrWhy(job: IJob): string {
  if (job.state === 'running' && job.placement && job.placement.length > 0) {
    return `on ${placementText(job.placement)}`;
  }
  const estimate = capitalized(estimateText(job, Date.now()));
  return estimate || job.reason || '';
}

export class HiveNotebookView extends Widget implements IRenderMime.IRenderer {
  constructor(
    readonly model: ClusterModel,
    readonly openLogs: (job: IJob) => void,
    readonly sanitizer: IRenderMime.ISanitizer | null = null
  ) {
    super();
    this.addClass('jp-HiveView');
    this._title = el('div', 'jp-HiveView-title');
    this._error = el('div', 'jp-HiveView-error');
    this._error.hidden = true;
    this._vcs = el('div', 'jp-HiveView-vcs');
    this._heatmapHost = el('div', 'jp-HiveView-heatmapHost');
    this._jobsBox = el('div', 'jp-HiveView-jobsBox');
    this.node.append(this._title, this._error, this._vcs, this._heatmapHost, this._jobsBox);
    model.changed.connect(this._onChanged, this);
  }

  async renderModel(mimeModel: IRenderMime.IMimeModel): Promise<void> {
    this._request = (mimeModel.data[VIEW_MIME] ?? { view: 'jobs' }) as unknown as IViewRequest;
    this.node.dataset.view = this._request.view;
    if (this._request.view === 'job') {
      return this._renderJobLine(String(mimeModel.data['text/html'] ?? ''));
    }
    if (this._request.view === 'array') {
      return this._renderArray(String(mimeModel.data['text/html'] ?? ''), mimeModel.trusted);
    }
    if (this._request.view === 'status' && !this._heatmap) {
      this._heatmap = new HeatmapWidget(this.model);
      this._heatmap.id = '';
      this._heatmap.title.closable = false;
      this._heatmap.addClass('jp-HiveView-heatmap');
    }
    this.model.start();
    await this.refresh();
  }

  /** Fetches this view's jobs (the panel's model holds the counts, VCs and GPUs). */
  async refresh(): Promise<void> {
    const r = this._request;
    if (!r || r.view === 'job' || r.view === 'array') {
      return;
    }
    const query: Record<string, string | number> = { limit: r.limit ?? 50, elements: 'false' };
    if (!r.all) {
      query.user = 'me';
    }
    if (r.states && r.states.length > 0) {
      query.state = r.states.join(',');
    }
    if (r.vc) {
      query.vc = r.vc;
    }
    try {
      this._jobs = sortJobs((await this.model.api.jobs(query)).jobs);
      this._failure = null;
    } catch (error) {
      this._failure = (error as Error).message;
    }
    this.render();
  }

  render(): void {
    const r = this._request;
    if (!r || this.isDisposed || r.view === 'job' || r.view === 'array') {
      return;
    }
    const m = this.model;
    this._error.textContent = this._failure ?? m.error ?? '';
    this._error.hidden = !this._error.textContent;
    if (r.view === 'status') {
      const who = m.me ? ` — you are ${m.me.user}${m.me.admin ? ' (admin)' : ''}, VCs: ${m.me.vcs.join(', ') || 'none'}` : '';
      this._title.textContent =
        m.gpusTotal === null ? 'hive-lab — connecting…' : `hive-lab${who} — ${m.gpusFree} of ${m.gpusTotal} GPUs free`;
      this._vcs.replaceChildren(this._vcTable(m.vcs));
    } else {
      const active = this._jobs.filter(j => ACTIVE_STATES.has(j.state)).length;
      const whose = r.all ? "everyone's" : 'my';
      this._title.textContent = `${this._jobs.length} of ${whose} jobs (${active} active)`;
    }
    const heading = r.view === 'status' ? [el('div', 'jp-HiveView-subtitle', r.all ? 'Jobs' : 'My jobs')] : [];
    this._jobsBox.replaceChildren(...heading, this._jobTable());
    if (this._heatmap && !this._heatmap.isAttached && this.isAttached) {
      Widget.attach(this._heatmap, this._heatmapHost);  // it paints once attached and visible
    }
    this._heatmap?.render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._debounce);
    this.model.changed.disconnect(this._onChanged, this);
    this.model.jobEvent.disconnect(this._onJobEvent, this);
    if (this._heatmap) {
      if (this._heatmap.isAttached && this._heatmap.node.isConnected) {
        Widget.detach(this._heatmap);
      }
      this._heatmap.dispose();
    }
    super.dispose();
  }

  protected onAfterAttach(): void {
    this.render();
    this._drawChart();
  }

  protected onBeforeDetach(): void {
    this._detaches += 1;
  }

  /**
   * A %%submit cell's lines as the kernel last drew them (status, "as of", log tail), with the status
   * line then taken from the server: a notebook saved while its job ran, reopened after it ended, says
   * how it ended, not "running". A job this server does not know keeps its saved lines.
   */
  private async _renderJobLine(savedHtml: string): Promise<void> {
    this._title.hidden = true;
    this._lines.innerHTML = this.sanitizer ? this.sanitizer.sanitize(savedHtml) : '';
    if (!this._lines.isConnected) {
      this.node.replaceChildren(this._error, this._lines);
    }
    this._error.hidden = true;
    this.model.jobEvent.disconnect(this._onJobEvent, this);
    this.model.jobEvent.connect(this._onJobEvent, this);
    this.model.start();
    try {
      this._showJob(await this.model.api.request<IJob>(`jobs/${encodeURIComponent(this._request!.id ?? '')}`));
    } catch {
      // not a job of this server (a notebook from elsewhere), or the server is away: the saved lines stand
    }
  }

  private _showJob(job: IJob): void {
    const status = this._lines.querySelector('.hive-status');
    if (!status) {
      return;
    }
    const icon = el('span', 'jp-HiveView-icon', stateIcon(job.state));
    icon.style.color = STATE_COLORS[job.state] ?? '#ff9f1c';
    icon.style.fontWeight = 'bold';
    const line = el('span', 'jp-HiveView-line', statusLine(job, Date.now()));
    line.style.fontFamily = 'monospace';
    status.replaceChildren(icon, document.createTextNode(' '), line);
    status.setAttribute('data-state', job.state);
    const asOf = this._lines.querySelector('.hive-as-of');
    const tail = this._lines.querySelector('.hive-log');
    if (asOf && tail && !this._lines.querySelector('.hive-log-continues')) {
      // the tail was saved while the job ran: it wrote on after it (hive_lab.widgets.job_monitor's line)
      tail.after(el('div', 'hive-log-continues', logContinuesText(job.id)));
    }
    asOf?.remove();  // this line is true now: no stamp
  }

  private _onJobEvent(_: ClusterModel, job: IJob): void {
    if (this._request?.view === 'job' && job.id === this._request.id) {
      this._showJob(job);
    }
    if (this._request?.view === 'array' && job.array_id === this._request.id) {
      window.clearTimeout(this._debounce);  // a burst of its elements' events: one refetch
      this._debounce = window.setTimeout(() => void this._fetchArray(), 300);
    }
  }

  /**
   * A %%submit --array/--sweep cell: the table as the kernel last drew it, its charts drawn with BokehJS,
   * and the array's line then taken from the server (live while open: its elements' events refetch it).
   * Charts are Bokeh documents, which may hold code: only a trusted output's are drawn (a notebook run or
   * saved by its reader), as Jupyter runs only trusted outputs' scripts.
   */
  private async _renderArray(savedHtml: string, trusted: boolean): Promise<void> {
    this._title.hidden = true;
    this._lines.innerHTML = this.sanitizer ? this.sanitizer.sanitize(savedHtml) : '';
    const results = this._lines.querySelector('table.hive-array-results');
    if (results) {
      sortableTable(results as HTMLTableElement);
    }
    if (!this._charts.isConnected) {
      this.node.replaceChildren(this._error, this._lines, this._charts);
    }
    this._error.hidden = true;
    this.model.jobEvent.disconnect(this._onJobEvent, this);
    this.model.jobEvent.connect(this._onJobEvent, this);
    this.model.start();
    const chart = this._request?.chart;
    this._chartToDraw = null;
    if (chart && chart === this._chartDrawn && this._charts.isConnected) {
      // a live update with the same charts (only the counts changed): nothing to redraw
    } else if (!chart) {
      this._chartDrawn = null;
      this._charts.replaceChildren();
    } else if (!trusted) {
      this._chartDrawn = null;
      this._charts.replaceChildren(el('div', 'jp-HiveView-untrusted',
        'The charts are not drawn: this notebook is not trusted (run its cells, or trust it: "Trust Notebook" in the command palette).'));
    } else {
      this._chartToDraw = chart;
      this._drawChart();
    }
    await this._fetchArray();
  }

  /**
   * BokehJS draws only into the page: a chart rendered before the output is attached waits for it, and one
   * whose output was detached while BokehJS loaded or drew (Bokeh: "element ... must be under <body>") is
   * drawn again at the next attach, not left as an error.
   */
  private _drawChart(): void {
    const chart = this._chartToDraw;
    if (!chart || !this._charts.isConnected) {
      return;
    }
    this._chartToDraw = null;
    this._chartDrawn = chart;
    const detaches = this._detaches;
    const detached = (): boolean => this._detaches !== detaches || !this._charts.isConnected;
    embedChart(this.model.api.settings, chart, this._charts)
      .then(() => {
        if (detached()) {
          this._redrawLater(chart);
        }
      })
      .catch(error => {
        if (detached()) {
          this._redrawLater(chart);
          return;
        }
        this._chartDrawn = null;
        this._charts.replaceChildren(el('div', 'jp-HiveView-error', `The charts could not be drawn: ${(error as Error).message}`));
      });
  }

  /** The chart's drawing met a detached output: draw it now if it is back, else at the next attach. */
  private _redrawLater(chart: string): void {
    if (this._chartDrawn !== chart) {
      return; // another chart (or none) was asked for meanwhile
    }
    this._chartDrawn = null;
    this._chartToDraw = chart;
    this._drawChart();
  }

  private async _fetchArray(): Promise<void> {
    const r = this._request;
    if (!r || r.view !== 'array' || this.isDisposed) {
      return;
    }
    let array: IArray;
    try {
      array = await this.model.api.array(r.id ?? '', 1);
    } catch {
      return; // not an array of this server (a notebook from elsewhere), or the server is away: the saved lines stand
    }
    const line = this._lines.querySelector('.hive-array-status');
    if (!line) {
      return;
    }
    const ended = array.state === 'ended';
    const icon = el('span', 'jp-HiveView-icon', ended ? '✔' : array.state === 'running' ? '▶' : '◷');
    icon.style.color = ended || array.state === 'running' ? '#2ca02c' : array.state === 'held' ? '#7f7f7f' : '#ff9f1c';
    icon.style.fontWeight = 'bold';
    const text = el('span', 'jp-HiveView-line', arrayLine(array));
    text.style.fontFamily = 'monospace';
    line.replaceChildren(icon, document.createTextNode(' '), text);
    line.setAttribute('data-state', array.state);
    const stamp = this._lines.querySelector('.hive-as-of');
    if (stamp && ended && !r.ended && !stamp.classList.contains('hive-stale')) {
      // the table below was drawn before the end: say so, and how to get the final one
      stamp.textContent = `The table is ${stamp.textContent}; the array has ended since: run its .show_results() for the final one.`;
      stamp.classList.add('hive-stale');
    } else if (stamp && !ended) {
      stamp.remove(); // the line is true now
    }
  }

  private _vcTable(vcs: IVc[]): HTMLElement {
    const box = el('div');
    box.appendChild(el('div', 'jp-HiveView-subtitle', 'Virtual clusters'));
    const table = el('table', 'jp-HiveView-table');
    const head = el('tr');
    for (const h of ['VC', 'guaranteed', 'used', LENT_GPUS, 'queued', 'running jobs']) {
      head.appendChild(el('th', undefined, h));
    }
    table.appendChild(head);
    for (const vc of vcs) {
      const row = el('tr');
      row.dataset.vc = vc.name;
      for (const v of [vc.name + (vc.mine ? ' (mine)' : ''), gpusText(vc.guaranteed_gpus), gpusText(vc.used_gpus),
                       gpusText(vc.opportunistic_gpus), String(vc.queue_length), String(vc.running_jobs)]) {
        row.appendChild(el('td', undefined, v));
      }
      table.appendChild(row);
    }
    box.appendChild(table);
    return box;
  }

  private _jobTable(): HTMLElement {
    const r = this._request!;
    const me = this.model.me;
    const table = el('table', 'jp-HiveView-table jp-HiveView-jobs');
    const head = el('tr');
    const columns = ['job', 'name', 'state', 'wait reason / where', 'GPUs', 'VC', ...(r.all || r.view === 'status' ? ['user'] : []), 'age', ''];
    for (const h of columns) {
      head.appendChild(el('th', undefined, h));
    }
    table.appendChild(head);
    const now = Date.now();
    for (const job of this._jobs) {
      const mine = !!me && job.user === me.user;
      const row = el('tr', 'jp-HiveView-job');
      row.dataset.jobId = job.id;
      row.dataset.state = job.state;
      row.title = statusLine(job, now);
      const name = el('td', 'jp-HiveView-name', job.name);
      name.title = job.name;
      const state = el('td', `jp-HivePanel-state jp-HivePanel-state-${job.state}`, job.state);
      if (job.exit_code !== null && job.exit_code !== undefined && !ACTIVE_STATES.has(job.state)) {
        state.title = `exit code ${job.exit_code}`;
      }
      const where = el('td', 'jp-HiveView-where', whereOrWhy(job));
      where.title = job.reason ?? '';
      row.append(el('td', 'jp-HiveView-id', job.id), name, state, where, el('td', undefined, gpusText(job.gpus, job.gpu_type)),
                 el('td', undefined, job.vc));
      if (r.all || r.view === 'status') {
        row.appendChild(el('td', undefined, job.user));
      }
      row.appendChild(el('td', undefined, age(job.submitted_at, now)));
      const actions = el('td', 'jp-HiveView-actions');
      if (mine || me?.admin) {
        const logs = el('button', 'jp-HiveView-logs jp-mod-styled', 'logs');
        logs.title = `Show ${job.id}'s logs in the GPU cluster panel`;
        logs.onclick = () => this.openLogs(job);
        actions.appendChild(logs);
        if (ACTIVE_STATES.has(job.state)) {
          const cancel = el('button', 'jp-HiveView-cancel jp-mod-styled', 'cancel');
          cancel.title = mine ? `Cancel ${job.id}` : `Cancel ${job.user}'s job ${job.id} (as an admin)`;
          cancel.onclick = () => void this._cancel(job, mine);
          actions.appendChild(cancel);
        }
      }
      row.appendChild(actions);
      table.appendChild(row);
    }
    if (this._jobs.length === 0) {
      const row = el('tr');
      const cell = el('td', 'jp-HiveView-empty', r.states || r.vc ? 'No jobs match.' : 'No jobs yet.');
      cell.colSpan = columns.length;
      row.appendChild(cell);
      table.appendChild(row);
    }
    return table;
  }

  private async _cancel(job: IJob, mine: boolean): Promise<void> {
    const answer = await showDialog({
      title: 'Cancel job',
      body: `Cancel ${job.name || job.id} (${job.id})${mine ? '' : ` of ${job.user}`}? Its GPUs are released.`,
      buttons: [Dialog.cancelButton({ label: 'Keep' }), Dialog.warnButton({ label: 'Cancel job' })]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      await this.model.cancel(job.id);
    } catch (error) {
      void showErrorMessage(`Could not cancel ${job.id}`, (error as Error).message);
    }
    await this.refresh();
  }

  private _onChanged(): void {
    // the model changes on every event: refetch this view's own list at most every 300 ms
    window.clearTimeout(this._debounce);
    this._debounce = window.setTimeout(() => void this.refresh(), 300);
  }

  private _request: IViewRequest | null = null;
  private _jobs: IJob[] = [];
  private _failure: string | null = null;
  private _debounce = 0;
  private _heatmap: HeatmapWidget | null = null;
  private readonly _title: HTMLDivElement;
  private readonly _error: HTMLDivElement;
  private readonly _lines = el('div', 'jp-HiveView-lines');
  private readonly _charts = el('div', 'jp-HiveView-charts');
  private _chartToDraw: string | null = null;
  private _chartDrawn: string | null = null;
  private _detaches = 0; // times this output left the page (a chart drawn across one is drawn again)
  private readonly _vcs: HTMLDivElement;
  private readonly _heatmapHost: HTMLDivElement;
  private readonly _jobsBox: HTMLDivElement;
}

/** The renderer factory: one view per output, all on the extension's one model. */
export function viewRendererFactory(model: ClusterModel, openLogs: (job: IJob) => void): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [VIEW_MIME],
    defaultRank: VIEW_RANK,
    createRenderer: options => new HiveNotebookView(model, openLogs, options.sanitizer)
  };
}

/** `log continues: hive-lab logs J`: hive_lab.widgets.job_monitor.log_continues_text. */
export function logContinuesText(jobId: string): string {
  return `log continues: hive-lab logs ${jobId}`;
}
