/**
 * The "GPU cluster" sidebar: my jobs / all jobs (state, wait reason, GPUs, VC, user, age),
 * cancel for one's own jobs, a log viewer that follows a running job, and VC usage.
 * Plain DOM, re-rendered from the shared ClusterModel on every change.
 */
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ACTIVE_STATES, arrayCountsText, describeLimits, IArray, IArrayElement, IJob, IVc } from './api';
import { InstructorView, JobFilterBar } from './instructor';
import { PENDING_STATES } from './jobStates';
import { acceptJobFiles } from './filedrop';
import { LogsWidget, LogViewer } from './logs';
import {
  capitalized,
  duration,
  estimateText,
  gpusText,
  LENT_GPUS,
  progressShort,
  statusLine,
  timeLimitText,
  whenText
} from './format';
import { age, ClusterModel } from './model';

export { duration };
import { ScheduleList } from './schedules';
import { el } from './dom';

type Tab = 'mine' | 'all';

/** States whose reason says why the job waits (running jobs' reasons are just launch notes). */


export class ClusterPanel extends Widget {
  constructor(
    readonly model: ClusterModel,
    private readonly _openHeatmap: () => void,
    openNotebook?: (job: IJob, path: string) => Promise<unknown>,
    private readonly _placeLogs: (widget: Widget) => void = () => undefined
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
    this._state = el('select', 'jp-HivePanel-stateFilter');
    this._state.title = 'Show all jobs, only waiting or running ones, or only finished ones';
    for (const [value, label] of [
      ['all', 'all'],
      ['active', 'waiting or running'],
      ['finished', 'finished']
    ]) {
      const option = el('option', undefined, label);
      option.value = value;
      this._state.appendChild(option);
    }
    this._state.onchange = () => this._renderJobs();
    this._bulkCancel = el('button', 'jp-HivePanel-bulkCancel jp-mod-styled jp-mod-warn');
    this._bulkCancel.hidden = true;
    this._bulkCancel.onclick = () => void this._cancelSelected();
    tabs.append(this._state, this._bulkCancel);
    this._tabs = tabs;
    this._banner = el('div', 'jp-HivePanel-simulated');
    this._banner.hidden = true;

    this._filters = new JobFilterBar(model);
    this._instructor = new InstructorView(model);
    this._jobs = el('div', 'jp-HivePanel-jobs');
    this._vcs = el('div', 'jp-HivePanel-vcs');
    this._error = el('div', 'jp-HivePanel-error');
    this._logs = new LogViewer(model, openNotebook);
    this._logsWidget = new LogsWidget(this._logs);
    this._schedules = new ScheduleList(model);

    this.node.append(
      header,
      this._banner,
      this._error,
      tabs,
      this._filters.node,
      this._jobs,
      this._instructor.node,
      el('h3', 'jp-HivePanel-section', 'Virtual clusters'),
      this._vcs,
      el('h3', 'jp-HivePanel-section', 'Schedules'),
      this._schedules.node
    );
    acceptJobFiles(this.node, model); // a job file dropped on the panel is submitted as it is
    model.changed.connect(this.render, this);
    this._ageTimer = window.setInterval(() => this._renderJobs(), 15000);
    this.render();
  }

  dispose(): void {
    window.clearInterval(this._ageTimer);
    this.model.changed.disconnect(this.render, this);
    this._logsWidget.dispose();
    this._schedules.dispose();
    this._instructor.dispose();
    super.dispose();
  }

  /** Shows (and follows) a job's log in the log viewer, a tab in the main area. */
  showLogs(job: IJob): void {
    this._logs.show(job);
    this._placeLogs(this._logsWidget);
    this._renderJobs();
  }

  /** The main-area log viewer (for the shell and tests). */
  get logsWidget(): LogsWidget {
    return this._logsWidget;
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
    const hardware = m.cluster?.hardware;
    this._banner.hidden = !hardware?.simulated;
    this._banner.textContent = hardware?.simulated
      ? `Simulated cluster: this machine has no NVIDIA GPU, so its ${m.gpusTotal ?? ''} GPUs are modelled. ` +
        'Jobs are scheduled and run, and see CUDA_VISIBLE_DEVICES, but no GPU is behind it. ' +
        'For real GPUs, run hive-lab on a GPU machine or point HiveLabApp.cluster_config at your cluster.'
      : '';
    for (const button of Array.from(this._tabs.querySelectorAll('.jp-HivePanel-tab')) as HTMLElement[]) {
      const selected = button.dataset.tab === this._tab;
      button.classList.toggle('jp-mod-selected', selected);
      button.setAttribute('aria-selected', String(selected));
    }
    // admins (instructors) of a shared server: filter "All jobs" by user and VC; idle GPUs and usage below
    this._filters.node.hidden = !(m.me?.admin && m.me?.shared && this._tab === 'all');
    if (!this._filters.node.hidden) {
      this._filters.render();
    }
    this._renderJobs();
    this._instructor.render();
    this._renderVcs(m.vcs);
  }

  private _renderJobs(): void {
    const m = this.model;
    const state = this._state.value;
    const shown = (this._tab === 'mine' ? m.myJobs : m.allJobs).filter(
      job =>
        state === 'all' || (state === 'active') === ACTIVE_STATES.has(job.state)
    );
    const list = el('ul', 'jp-HivePanel-jobList');
    list.dataset.tab = this._tab;
    const now = Date.now();
    const arrays =
      this._tab === 'mine'
        ? m.myArrays.filter(a => state === 'all' || (state === 'active') === (a.state !== 'ended'))
        : [];
    for (const row of activeFirst(arrays, shown)) {
      list.appendChild('count' in row ? this._arrayItem(row as IArray) : this._jobItem(row as IJob, now));
    }
    // a selection only holds jobs still shown and still cancellable
    const cancellable = new Set(shown.filter(j => ACTIVE_STATES.has(j.state)).map(j => j.id));
    for (const id of Array.from(this._selected)) {
      if (!cancellable.has(id)) {
        this._selected.delete(id);
      }
    }
    this._renderBulk();
    if (shown.length === 0 && arrays.length === 0) {
      const f = m.jobFilter;
      const filtered = state !== 'all' || (this._tab === 'all' && (f.user || f.vc));
      if (filtered || !m.loaded || this._tab !== 'mine') {
        list.appendChild(
          el('li', 'jp-HivePanel-empty', filtered ? 'No jobs match the filter.' : 'No jobs yet.')
        );
      } else {
        list.appendChild(emptyState());
      }
    }
    this._jobs.replaceChildren(list);
  }

  private _renderBulk(): void {
    const n = this._selected.size;
    this._bulkCancel.hidden = n === 0;
    this._bulkCancel.textContent = `Cancel ${n} selected`;
    this._bulkCancel.title = `Cancel the ${n} selected job${n === 1 ? '' : 's'}`;
  }

  private async _cancelSelected(): Promise<void> {
    const ids = Array.from(this._selected);
    if (ids.length === 0) {
      return;
    }
    const answer = await showDialog({
      title: 'Cancel jobs',
      body: `Cancel ${ids.length} job${ids.length === 1 ? '' : 's'} (${ids.join(', ')})? Their GPUs are released.`,
      buttons: [Dialog.cancelButton({ label: 'Keep' }), Dialog.warnButton({ label: 'Cancel jobs' })]
    });
    if (!answer.button.accept) {
      return;
    }
    const failed: string[] = [];
    for (const id of ids) {
      try {
        await this.model.cancel(id);
      } catch (error) {
        failed.push(`${id}: ${(error as Error).message}`);
      }
      this._selected.delete(id);
    }
    this._renderJobs();
    if (failed.length > 0) {
      void showErrorMessage('Some jobs were not cancelled', failed.join('\n'));
    }
  }

  /**
   * A job array is one row (name, id, counts by state); clicking it opens its elements (the first
   * 200, by index, fetched then and on each change while open).
   */
  private _arrayItem(array: IArray): HTMLLIElement {
    const item = el('li', 'jp-HivePanel-array');
    item.dataset.arrayId = array.id;
    item.dataset.state = array.state;
    const open = this._openArrays.has(array.id);
    const top = el('div', 'jp-HivePanel-jobTop');
    const toggle = el('button', 'jp-HivePanel-arrayToggle', open ? '▾' : '▸');
    toggle.title = open ? 'Hide the elements' : 'Show the elements';
    toggle.setAttribute('aria-expanded', String(open));
    const name = el('span', 'jp-HivePanel-jobName', `${array.name} [${array.count}]`);
    name.title =
      `${array.name} · ${array.id}: ${array.count} elements` + (array.throttle ? `, at most ${array.throttle} at once` : '');
    const badge = el('span', `jp-HivePanel-state jp-HivePanel-state-${array.state}`, array.state);
    top.append(toggle, name, el('span', 'jp-HivePanel-jobId', array.id), badge);
    top.onclick = () => {
      if (this._openArrays.has(array.id)) {
        this._openArrays.delete(array.id);
      } else {
        this._openArrays.add(array.id);
        void this._loadElements(array.id);
      }
      this._renderJobs();
    };
    const meta = el('div', 'jp-HivePanel-jobMeta');
    meta.appendChild(el('span', 'jp-HivePanel-arrayCounts', arrayCountsText(array.counts)));
    if (array.state !== 'ended') {
      const cancel = el('button', 'jp-HivePanel-cancel', 'cancel');
      cancel.title = `Cancel every element of ${array.id} not ended`;
      cancel.onclick = async event => {
        event.stopPropagation();
        const answer = await showDialog({
          title: 'Cancel array',
          body: `Cancel the elements of ${array.name} (${array.id}) that have not ended?`,
          buttons: [Dialog.cancelButton({ label: 'Keep' }), Dialog.warnButton({ label: 'Cancel array' })]
        });
        if (!answer.button.accept) {
          return;
        }
        try {
          await this.model.api.cancelArray(array.id);
          await this.model.refresh();
        } catch (error) {
          void showErrorMessage('Could not cancel the array', (error as Error).message);
        }
      };
      const actions = el('span', 'jp-HivePanel-rowActions');
      actions.appendChild(cancel);
      meta.appendChild(actions);
    }
    item.append(top, meta);
    if (array.reason) {
      item.appendChild(el('div', 'jp-HivePanel-reason', array.reason));
    }
    if (open) {
      const elements = el('ul', 'jp-HivePanel-arrayElements');
      for (const e of this._elements.get(array.id) ?? []) {
        elements.appendChild(this._elementItem(e));
      }
      if (array.count > 200) {
        elements.appendChild(el('li', 'jp-HivePanel-empty', `the first 200 of ${array.count}; hive-lab jobs ${array.id} lists all`));
      }
      item.appendChild(elements);
      if (!this._loading.has(array.id)) {
        void this._loadElements(array.id, array.counts);
      }
    }
    return item;
  }

  private _elementItem(e: IArrayElement): HTMLLIElement {
    const item = el('li', 'jp-HivePanel-arrayElement');
    item.dataset.index = String(e.index);
    item.dataset.state = e.state;
    const params = e.params ? Object.entries(e.params).map(([k, v]) => `${k}=${v}`).join(' ') : '';
    item.append(
      el('span', 'jp-HivePanel-arrayIndex', `[${e.index}]`),
      el('span', `jp-HivePanel-state jp-HivePanel-state-${e.state}`, e.state),
      el('span', 'jp-HivePanel-jobId', e.job_id ?? ''),
      el('span', 'jp-HivePanel-arrayParams', params)
    );
    if (e.exit_code !== null && e.exit_code !== undefined) {
      item.title = `exit code ${e.exit_code}`;
    }
    return item;
  }

  /** Fetches an open array's elements unless its counts are those they were fetched with. */
  private async _loadElements(id: string, counts?: Record<string, number>): Promise<void> {
    const key = counts ? JSON.stringify(counts) : '';
    if (counts && this._elementsKey.get(id) === key) {
      return;
    }
    this._loading.add(id);
    try {
      const array = await this.model.api.array(id, 200);
      this._elements.set(id, array.elements ?? []);
      this._elementsKey.set(id, JSON.stringify(array.counts));
    } catch (error) {
      this._elements.set(id, []);
    } finally {
      this._loading.delete(id);
    }
    this._renderJobs();
  }

  private _jobItem(job: IJob, now: number): HTMLLIElement {
    const mine = !!this.model.me && job.user === this.model.me.user;
    const item = el('li', 'jp-HivePanel-job');
    item.dataset.jobId = job.id;
    item.dataset.state = job.state;
    item.classList.toggle('jp-mod-selected', this._logs.jobId === job.id);

    const top = el('div', 'jp-HivePanel-jobTop');
    if ((mine || this.model.me?.admin) && ACTIVE_STATES.has(job.state)) {
      const pick = el('input', 'jp-HivePanel-select');
      pick.type = 'checkbox';
      pick.title = `Select ${job.id} (to cancel several jobs at once)`;
      pick.checked = this._selected.has(job.id);
      pick.onclick = event => event.stopPropagation();
      pick.onchange = () => {
        if (pick.checked) {
          this._selected.add(job.id);
        } else {
          this._selected.delete(job.id);
        }
        this._renderBulk();
      };
      top.appendChild(pick);
    }
    const name = el('span', 'jp-HivePanel-jobName', job.name || job.id);
    name.title = `${job.name || job.id} · ${job.id} (${job.kind}, priority ${job.opportunistic ? 'opportunistic' : job.priority})`;
    const badge = el('span', `jp-HivePanel-state jp-HivePanel-state-${job.state}`, job.state);
    if (job.exit_code !== null && job.exit_code !== undefined && !ACTIVE_STATES.has(job.state)) {
      badge.title = `exit code ${job.exit_code}`;
    }
    top.append(name, el('span', 'jp-HivePanel-jobId', job.id), badge);

    const meta = el('div', 'jp-HivePanel-jobMeta');
    const gpus = el('span', 'jp-HivePanel-gpus', gpusText(job.gpus));
    gpus.dataset.gpus = String(job.gpus);
    const vc = el('span', 'jp-HivePanel-vc', job.vc);
    vc.title = 'virtual cluster';
    const user = el('span', 'jp-HivePanel-user', job.user);
    // labelled as the CLI's column is ("age"), with the moment itself on hover
    const ageText = el('span', 'jp-HivePanel-age', `age ${age(job.submitted_at, now)}`);
    ageText.title = `submitted ${whenText(job.submitted_at)}`;
    meta.append(gpus, vc, user, ageText);
    if (job.time_limit_s !== null && job.time_limit_s !== undefined) {
      const words = timeLimitText(job, now);  // the CLI's and the cell's words
      const limit = el('span', 'jp-HivePanel-limit', job.state === 'running' ? words : `limit ${words}`);
      limit.title = job.deadline ? `time limit reached at ${whenText(job.deadline)}` : 'run time limit';
      meta.appendChild(limit);
    }

    const actions = el('span', 'jp-HivePanel-rowActions');
    if (mine || this.model.me?.admin) {
      const logs = el('button', 'jp-HivePanel-logsButton', 'logs');
      logs.title = "Show (and follow) this job's logs";
      logs.onclick = event => {
        event.stopPropagation();
        this.showLogs(job);
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
    item.title = statusLine(job, now);  // the cell's and the CLI's line, word for word
    if (job.reason && PENDING_STATES.has(job.state)) {
      item.appendChild(el('div', 'jp-HivePanel-reason', job.reason));
    }
    const estimate = estimateText(job, now);
    if (estimate && PENDING_STATES.has(job.state)) {
      const line = el('div', 'jp-HivePanel-estimate', capitalized(estimate));
      if (job.estimated_start) {
        line.title = `about ${whenText(job.estimated_start)}`;
      }
      item.appendChild(line);
    }
    const moving = job.state === 'running' ? progressShort(job, now) : null;
    if (moving) {
      item.appendChild(el('div', 'jp-HivePanel-progress', moving));
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
      // used_gpus counts the guarantee in use; opportunistic_gpus run opportunistic work beyond it.
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
      const borrowed = el('span', 'jp-HivePanel-vcBorrowed', `${LENT_GPUS} ${vc.opportunistic_gpus ?? 0}`);
      borrowed.title = 'GPUs used beyond the guarantee by opportunistic jobs';
      const queue = el('span', 'jp-HivePanel-vcQueue', `queue ${vc.queue_length}`);
      queue.dataset.queue = String(vc.queue_length);
      meta.append(borrowed, queue, el('span', undefined, `running ${vc.running_jobs ?? 0}`));
      if (vc.doomed_gpus) {
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
  private _state: HTMLSelectElement;
  private _bulkCancel: HTMLButtonElement;
  private _selected = new Set<string>();
  private _banner: HTMLDivElement;
  private _filters: JobFilterBar;
  private _instructor: InstructorView;
  private _counts: HTMLDivElement;
  private _jobs: HTMLDivElement;
  private _openArrays = new Set<string>();
  private _elements = new Map<string, IArrayElement[]>();
  private _elementsKey = new Map<string, string>();
  private _loading = new Set<string>();
  private _vcs: HTMLDivElement;
  private _error: HTMLDivElement;
  private _logs: LogViewer;
  private _logsWidget: LogsWidget;
  private _schedules: ScheduleList;
  private _ageTimer: number;
}


/**
 * Work that is running or waiting first, then what has ended (arrays and jobs alike); each group keeps
 * the model's order (newest first). An array is active until its state is `ended`.
 */
export function activeFirst(arrays: IArray[], jobs: IJob[]): (IArray | IJob)[] {
  const ended = (row: IArray | IJob) =>
    'count' in row ? (row as IArray).state === 'ended' : !ACTIVE_STATES.has((row as IJob).state);
  const rows: (IArray | IJob)[] = [...arrays, ...jobs];
  return [...rows.filter(r => !ended(r)), ...rows.filter(ended)];
}

/** What a new user sees instead of an empty list: two lines to try, each with a copy button. */
function emptyState(): HTMLLIElement {
  const item = el('li', 'jp-HivePanel-empty jp-HivePanel-welcome');
  item.appendChild(el('p', undefined, 'No jobs yet. Run a cell on a GPU from a notebook:'));
  const examples: [string, string][] = [
    ['in a notebook cell, then a cell below it', '%load_ext hive_lab'],
    ['', "%%submit --gpus 1 --wait\nimport os; print('my GPUs:', os.environ['CUDA_VISIBLE_DEVICES'])"],
    ['or in a terminal', "hive-lab submit --gpus 1 --wait -- python -c \"print('hello from a GPU job')\""]
  ];
  for (const [caption, code] of examples) {
    if (caption) {
      item.appendChild(el('div', 'jp-HivePanel-exampleCaption', caption));
    }
    const row = el('div', 'jp-HivePanel-example');
    const pre = el('pre', 'jp-HivePanel-exampleCode', code);
    const copy = el('button', 'jp-HivePanel-copy jp-mod-styled', 'copy');
    copy.title = 'Copy to the clipboard';
    copy.onclick = () => {
      void navigator.clipboard?.writeText(code).then(() => (copy.textContent = 'copied'));
    };
    row.append(pre, copy);
    item.appendChild(row);
  }
  item.appendChild(
    el('p', 'jp-HivePanel-dropHint', 'Or drop a job file you already have on this panel: an OpenPAI job, an sbatch script, a Kubernetes or Volcano manifest.')
  );
  return item;
}
