/**
 * The "GPU cluster" sidebar: my jobs / all jobs (state, wait reason, GPUs, VC, user, age),
 * cancel for one's own jobs, a log viewer that follows a running job, and VC usage.
 * Plain DOM, re-rendered from the shared ClusterModel on every change.
 */
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { ACTIVE_STATES, IJob, IVc } from './api';
import { LogViewer } from './logs';
import { age, ClusterModel } from './model';

type Tab = 'mine' | 'all';

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class ClusterPanel extends Widget {
  constructor(
    readonly model: ClusterModel,
    private readonly _openHeatmap: () => void
  ) {
    super();
    this.id = 'hive-lab-panel';
    this.title.caption = 'GPU cluster';
    this.addClass('jp-HivePanel');

    const header = el('div', 'jp-HivePanel-header');
    header.append(el('h2', 'jp-HivePanel-title', 'GPU cluster'));
    this._counts = el('div', 'jp-HivePanel-counts');
    const heatmapButton = el('button', 'jp-HivePanel-button jp-mod-styled', 'Heatmap');
    heatmapButton.title = 'Open the GPU topology heatmap';
    heatmapButton.onclick = () => this._openHeatmap();
    const refreshButton = el('button', 'jp-HivePanel-button jp-mod-styled', 'Refresh');
    refreshButton.onclick = () => void this.model.refresh();
    const actions = el('div', 'jp-HivePanel-actions');
    actions.append(heatmapButton, refreshButton);
    header.append(this._counts, actions);

    const tabs = el('div', 'jp-HivePanel-tabs');
    tabs.setAttribute('role', 'tablist');
    for (const [tab, label] of [
      ['mine', 'My jobs'],
      ['all', 'All jobs']
    ] as [Tab, string][]) {
      const button = el('button', 'jp-HivePanel-tab', label);
      button.dataset.tab = tab;
      button.setAttribute('role', 'tab');
      button.onclick = () => {
        this._tab = tab;
        this.render();
      };
      tabs.appendChild(button);
    }
    this._tabs = tabs;

    this._jobs = el('div', 'jp-HivePanel-jobs');
    this._vcs = el('div', 'jp-HivePanel-vcs');
    this._error = el('div', 'jp-HivePanel-error');
    this._logs = new LogViewer(model);

    this.node.append(
      header,
      this._error,
      tabs,
      this._jobs,
      el('h3', 'jp-HivePanel-section', 'Virtual clusters'),
      this._vcs,
      this._logs.node
    );
    model.changed.connect(this.render, this);
    this._ageTimer = window.setInterval(() => this._renderJobs(), 15000);
    this.render();
  }

  dispose(): void {
    window.clearInterval(this._ageTimer);
    this.model.changed.disconnect(this.render, this);
    this._logs.dispose();
    super.dispose();
  }

  render(): void {
    const m = this.model;
    this._counts.textContent =
      m.gpusTotal === null
        ? 'connecting…'
        : `${m.gpusFree} / ${m.gpusTotal} GPUs free` +
          (m.me ? ` · ${m.me.user}${m.me.admin ? ' (admin)' : ''}` : '') +
          (m.connected ? '' : ' · offline, polling');
    this._error.textContent = m.error ?? '';
    this._error.hidden = !m.error;
    for (const button of Array.from(this._tabs.children) as HTMLElement[]) {
      const selected = button.dataset.tab === this._tab;
      button.classList.toggle('jp-mod-selected', selected);
      button.setAttribute('aria-selected', String(selected));
    }
    this._renderJobs();
    this._renderVcs(m.vcs);
  }

  private _renderJobs(): void {
    const m = this.model;
    const jobs = this._tab === 'mine' ? m.myJobs : m.allJobs;
    const table = el('table', 'jp-HivePanel-table');
    table.dataset.tab = this._tab;
    const head = el('tr');
    for (const title of ['job', 'state', 'GPUs', 'VC', 'user', 'age', '']) {
      head.appendChild(el('th', undefined, title));
    }
    table.createTHead().appendChild(head);
    const body = table.createTBody();
    const now = Date.now();
    for (const job of jobs) {
      body.appendChild(this._jobRow(job, now));
      if (job.reason && ACTIVE_STATES.has(job.state)) {
        const reasonRow = el('tr', 'jp-HivePanel-reasonRow');
        reasonRow.dataset.jobId = job.id;
        const cell = el('td', 'jp-HivePanel-reason', job.reason);
        cell.colSpan = 7;
        reasonRow.appendChild(cell);
        body.appendChild(reasonRow);
      }
    }
    if (jobs.length === 0) {
      const row = el('tr');
      const cell = el('td', 'jp-HivePanel-empty', 'No jobs yet.');
      cell.colSpan = 7;
      row.appendChild(cell);
      body.appendChild(row);
    }
    this._jobs.replaceChildren(table);
  }

  private _jobRow(job: IJob, now: number): HTMLTableRowElement {
    const mine = !!this.model.me && job.user === this.model.me.user;
    const row = el('tr', 'jp-HivePanel-job');
    row.dataset.jobId = job.id;
    row.dataset.state = job.state;
    row.classList.toggle('jp-mod-selected', this._logs.jobId === job.id);
    const name = el('td', 'jp-HivePanel-name');
    name.append(el('span', 'jp-HivePanel-jobName', job.name || job.id));
    name.append(el('span', 'jp-HivePanel-jobId', job.id));
    name.title = `${job.id} (${job.kind}, priority ${job.opportunistic ? 'opportunistic' : job.priority})`;
    const state = el('td');
    const badge = el('span', `jp-HivePanel-state jp-HivePanel-state-${job.state}`, job.state);
    if (job.exit_code !== null && job.exit_code !== undefined && !ACTIVE_STATES.has(job.state)) {
      badge.title = `exit code ${job.exit_code}`;
    }
    state.appendChild(badge);
    row.append(
      name,
      state,
      el('td', 'jp-HivePanel-gpus', String(job.gpus)),
      el('td', 'jp-HivePanel-vc', job.vc),
      el('td', 'jp-HivePanel-user', job.user),
      el('td', 'jp-HivePanel-age', age(job.submitted_at, now))
    );
    const actions = el('td', 'jp-HivePanel-rowActions');
    if (mine || this.model.me?.admin) {
      const logs = el('button', 'jp-HivePanel-logsButton', 'logs');
      logs.title = 'Show (and follow) this job\'s logs';
      logs.onclick = event => {
        event.stopPropagation();
        this._logs.show(job);
        this._renderJobs();
      };
      actions.appendChild(logs);
    }
    if (mine && ACTIVE_STATES.has(job.state)) {
      const cancel = el('button', 'jp-HivePanel-cancel', 'cancel');
      cancel.title = `Cancel ${job.id}`;
      cancel.onclick = async event => {
        event.stopPropagation();
        const answer = await showDialog({
          title: 'Cancel job',
          body: `Cancel ${job.name || job.id} (${job.id})? Its GPUs are released.`,
          buttons: [Dialog.cancelButton({ label: 'Keep' }), Dialog.warnButton({ label: 'Cancel job' })]
        });
        if (!answer.button.accept) {
          return;
        }
        try {
          await this.model.cancel(job.id);
        } catch (error) {
          void showErrorMessage('Could not cancel the job', (error as Error).message);
        }
      };
      actions.appendChild(cancel);
    }
    row.appendChild(actions);
    return row;
  }

  private _renderVcs(vcs: IVc[]): void {
    const table = el('table', 'jp-HivePanel-table jp-HivePanel-vcTable');
    const head = el('tr');
    for (const title of ['VC', 'guaranteed', 'used', 'borrowed', 'queue', '']) {
      head.appendChild(el('th', undefined, title));
    }
    table.createTHead().appendChild(head);
    const body = table.createTBody();
    for (const vc of vcs) {
      const row = el('tr', 'jp-HivePanel-vcRow');
      row.dataset.vc = vc.name;
      const name = el('td', 'jp-HivePanel-vcName', vc.name);
      if (vc.mine) {
        name.classList.add('jp-mod-mine');
        name.title = 'You may submit to this VC';
      }
      const guaranteedUsed = Math.max(0, vc.used_gpus - vc.opportunistic_gpus);
      const bar = el('td', 'jp-HivePanel-barCell');
      const track = el('div', 'jp-HivePanel-bar');
      const fill = el('div', 'jp-HivePanel-barFill');
      const share = vc.guaranteed_gpus > 0 ? Math.min(1, guaranteedUsed / vc.guaranteed_gpus) : 0;
      fill.style.width = `${Math.round(share * 100)}%`;
      track.appendChild(fill);
      track.title = `${guaranteedUsed} of ${vc.guaranteed_gpus} guaranteed GPUs in use`;
      bar.appendChild(track);
      row.append(
        name,
        el('td', 'jp-HivePanel-num', String(vc.guaranteed_gpus)),
        el('td', 'jp-HivePanel-num', String(vc.used_gpus)),
        el('td', 'jp-HivePanel-num', String(vc.opportunistic_gpus)),
        el('td', 'jp-HivePanel-num', String(vc.queue_length)),
        bar
      );
      body.appendChild(row);
    }
    this._vcs.replaceChildren(table);
  }

  private _tab: Tab = 'mine';
  private _tabs: HTMLDivElement;
  private _counts: HTMLDivElement;
  private _jobs: HTMLDivElement;
  private _vcs: HTMLDivElement;
  private _error: HTMLDivElement;
  private _logs: LogViewer;
  private _ageTimer: number;
}
