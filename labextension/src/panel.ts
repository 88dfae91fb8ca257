/**
 * The "GPU cluster" sidebar: my jobs / all jobs (state, wait reason, GPUs, VC, user, age),
 * cancel for one's own jobs, a log viewer that follows a running job, and VC usage.
 * Plain DOM, re-rendered from the shared ClusterModel on every change.
 */
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ACTIVE_STATES, describeLimits, IJob, IVc } from './api';
import { InstructorView, JobFilterBar } from './instructor';
import { PENDING_STATES } from './jobStates';
import { LogViewer } from './logs';
import { age, ClusterModel } from './model';
import { ScheduleList } from './schedules';

type Tab = 'mine' | 'all';

/** States whose reason says why the job waits (running jobs' reasons are just launch notes). */

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
    refreshButton.onclick = () => {
      void this.model.refresh();
      void this._schedules.fetch();
    };
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

    this._filters = new JobFilterBar(model);
    this._instructor = new InstructorView(model);
    this._jobs = el('div', 'jp-HivePanel-jobs');
    this._vcs = el('div', 'jp-HivePanel-vcs');
    this._error = el('div', 'jp-HivePanel-error');
    this._logs = new LogViewer(model);
    this._schedules = new ScheduleList(model);

    this.node.append(
      header,
      this._error,
      tabs,
      this._filters.node,
      this._jobs,
      this._logs.node,
      this._instructor.node,
      el('h3', 'jp-HivePanel-section', 'Virtual clusters'),
      this._vcs,
      el('h3', 'jp-HivePanel-section', 'Schedules'),
      this._schedules.node
    );
    model.changed.connect(this.render, this);
    this._ageTimer = window.setInterval(() => this._renderJobs(), 15000);
    this.render();
  }

  dispose(): void {
    window.clearInterval(this._ageTimer);
    this.model.changed.disconnect(this.render, this);
    this._logs.dispose();
    this._schedules.dispose();
    this._instructor.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    this._instructor.setShown(true);
  }

  protected onAfterHide(msg: Message): void {
    this._instructor.setShown(false);
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
    // admins (instructors): filter "All jobs" by user and VC; idle GPUs and usage below
    this._filters.node.hidden = !(m.me?.admin && this._tab === 'all');
    if (!this._filters.node.hidden) {
      this._filters.render();
    }
    this._renderJobs();
    this._instructor.render();
    this._renderVcs(m.vcs);
  }

  private _renderJobs(): void {
    const m = this.model;
    const jobs = this._tab === 'mine' ? m.myJobs : m.allJobs;
    const list = el('ul', 'jp-HivePanel-jobList');
    list.dataset.tab = this._tab;
    const now = Date.now();
    for (const job of jobs) {
      list.appendChild(this._jobItem(job, now));
    }
    if (jobs.length === 0) {
      const f = m.jobFilter;
      const filtered = this._tab === 'all' && (f.user || f.vc);
      list.appendChild(
        el('li', 'jp-HivePanel-empty', filtered ? 'No jobs match the filter.' : 'No jobs yet.')
      );
    }
    this._jobs.replaceChildren(list);
  }

  private _jobItem(job: IJob, now: number): HTMLLIElement {
    const mine = !!this.model.me && job.user === this.model.me.user;
    const item = el('li', 'jp-HivePanel-job');
    item.dataset.jobId = job.id;
    item.dataset.state = job.state;
    item.classList.toggle('jp-mod-selected', this._logs.jobId === job.id);

    const top = el('div', 'jp-HivePanel-jobTop');
    const name = el('span', 'jp-HivePanel-jobName', job.name || job.id);
    name.title = `${job.id} (${job.kind}, priority ${job.opportunistic ? 'opportunistic' : job.priority})`;
    const badge = el('span', `jp-HivePanel-state jp-HivePanel-state-${job.state}`, job.state);
    if (job.exit_code !== null && job.exit_code !== undefined && !ACTIVE_STATES.has(job.state)) {
      badge.title = `exit code ${job.exit_code}`;
    }
    top.append(name, el('span', 'jp-HivePanel-jobId', job.id), badge);

    const meta = el('div', 'jp-HivePanel-jobMeta');
    const gpus = el('span', 'jp-HivePanel-gpus', `${job.gpus} GPU${job.gpus === 1 || (job.gpus > 0 && job.gpus < 1) ? '' : 's'}`);
    gpus.dataset.gpus = String(job.gpus);
    const vc = el('span', 'jp-HivePanel-vc', job.vc);
    vc.title = 'virtual cluster';
    const user = el('span', 'jp-HivePanel-user', job.user);
    const ageText = el('span', 'jp-HivePanel-age', age(job.submitted_at, now));
    ageText.title = `submitted ${job.submitted_at ?? ''}`;
    meta.append(gpus, vc, user, ageText);
    if (job.time_limit_s !== null && job.time_limit_s !== undefined) {
      const limit = el('span', 'jp-HivePanel-limit', limitText(job, now));
      limit.title = job.deadline ? `time limit reached at ${job.deadline}` : 'run time limit';
      meta.appendChild(limit);
    }

    const actions = el('span', 'jp-HivePanel-rowActions');
    if (mine || this.model.me?.admin) {
      const logs = el('button', 'jp-HivePanel-logsButton', 'logs');
      logs.title = "Show (and follow) this job's logs";
      logs.onclick = event => {
        event.stopPropagation();
        this._logs.show(job);
        this._renderJobs();
      };
      actions.appendChild(logs);
    }
    // students cancel their own jobs; admins anyone's (DELETE jobs/{id} checks the same)
    if ((mine || this.model.me?.admin) && ACTIVE_STATES.has(job.state)) {
      const cancel = el('button', 'jp-HivePanel-cancel', 'cancel');
      cancel.title = mine ? `Cancel ${job.id}` : `Cancel ${job.user}'s job ${job.id} (as an admin)`;
      cancel.onclick = async event => {
        event.stopPropagation();
        const whose = mine ? '' : ` of ${job.user}`;
        const answer = await showDialog({
          title: 'Cancel job',
          body: `Cancel ${job.name || job.id} (${job.id})${whose}? Its GPUs are released.`,
          buttons: [
            Dialog.cancelButton({ label: 'Keep' }),
            Dialog.warnButton({ label: 'Cancel job' })
          ]
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
    meta.appendChild(actions);
    item.append(top, meta);
    if (job.reason && PENDING_STATES.has(job.state)) {
      item.appendChild(el('div', 'jp-HivePanel-reason', job.reason));
    }
    const estimate = estimateText(job);
    if (estimate && PENDING_STATES.has(job.state)) {
      item.appendChild(el('div', 'jp-HivePanel-estimate', estimate));
    }
    return item;
  }

  private _renderVcs(vcs: IVc[]): void {
    const list = el('ul', 'jp-HivePanel-vcList');
    for (const vc of vcs) {
      const item = el('li', 'jp-HivePanel-vcRow');
      item.dataset.vc = vc.name;
      const top = el('div', 'jp-HivePanel-vcTop');
      const name = el('span', 'jp-HivePanel-vcName', vc.name);
      if (vc.mine) {
        name.classList.add('jp-mod-mine');
        name.title = 'You may submit to this VC';
      }
      // used_gpus counts the guarantee in use; opportunistic_gpus are borrowed beyond it.
      const guaranteedUsed = vc.used_gpus;
      const usage = el(
        'span',
        'jp-HivePanel-vcUsage',
        `${guaranteedUsed} / ${vc.guaranteed_gpus} guaranteed GPUs`
      );
      usage.dataset.used = String(vc.used_gpus);
      usage.dataset.guaranteed = String(vc.guaranteed_gpus);
      top.append(name, usage);
      const track = el('div', 'jp-HivePanel-bar');
      const fill = el('div', 'jp-HivePanel-barFill');
      const share = vc.guaranteed_gpus > 0 ? Math.min(1, guaranteedUsed / vc.guaranteed_gpus) : 0;
      fill.style.width = `${Math.round(share * 100)}%`;
      track.appendChild(fill);
      const meta = el('div', 'jp-HivePanel-vcMeta');
      const borrowed = el('span', 'jp-HivePanel-vcBorrowed', `borrowed ${vc.opportunistic_gpus}`);
      borrowed.title = 'GPUs used beyond the guarantee by opportunistic jobs';
      const queue = el('span', 'jp-HivePanel-vcQueue', `queue ${vc.queue_length}`);
      queue.dataset.queue = String(vc.queue_length);
      meta.append(borrowed, queue, el('span', undefined, `running ${vc.running_jobs}`));
      if (vc.doomed_gpus > 0) {
        meta.appendChild(el('span', 'jp-HivePanel-vcDoomed', `bad ${vc.doomed_gpus}`));
      }
      item.append(top, track, meta);
      const limits = vc.mine ? describeLimits(this.model.me?.limits?.[vc.name]) : '';
      if (limits) {
        item.appendChild(el('div', 'jp-HivePanel-vcLimits', `your limits in ${vc.name}: ${limits}`));
      }
      list.appendChild(item);
    }
    if (vcs.length === 0) {
      list.appendChild(el('li', 'jp-HivePanel-empty', 'No virtual clusters.'));
    }
    this._vcs.replaceChildren(list);
  }

  private _tab: Tab = 'mine';
  private _tabs: HTMLDivElement;
  private _filters: JobFilterBar;
  private _instructor: InstructorView;
  private _counts: HTMLDivElement;
  private _jobs: HTMLDivElement;
  private _vcs: HTMLDivElement;
  private _error: HTMLDivElement;
  private _logs: LogViewer;
  private _schedules: ScheduleList;
  private _ageTimer: number;
}

/** ``2h`` / ``1h30m`` / ``45s``: a limit as the server names it. */
export function limitShort(seconds: number): string {
  let rest = Math.round(seconds);
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]] as [string, number][]) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n) {
      parts.push(`${n}${unit}`);
    }
  }
  return parts.join('') || `${seconds}s`;
}

/** A job's limit, and while it runs the time left (counted down from its deadline). */
export function limitText(job: IJob, now: number): string {
  const limit = limitShort(job.time_limit_s ?? 0);
  if (job.state === 'running' && job.deadline) {
    const left = Math.max(0, (Date.parse(job.deadline) - now) / 1000);
    return `${limitShort(left)} left of ${limit}`;
  }
  return `limit ${limit}`;
}

/** A queued job's estimated start as one line ("Starts about 14:05 (when j-000004 ends ...)"); "" if none. */
export function estimateText(job: IJob): string {
  if (job.estimated_start_basis === undefined || job.estimated_start_basis === null) {
    return '';
  }
  const basis = job.estimated_start_basis ? ` (${job.estimated_start_basis})` : '';
  if (!job.estimated_start) {
    return `Start unknown${basis}`;
  }
  const at = new Date(job.estimated_start);
  return `Starts about ${at.toLocaleString([], { dateStyle: 'short', timeStyle: 'short' })}${basis}`;
}
