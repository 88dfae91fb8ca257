/**
 * The instructor's view in the "GPU cluster" panel (admins only): filter the job list by user and
 * VC, see who holds GPUs idle (the sampler's utilisation), and a per-user usage table for the
 * chosen (course) VC from `GET usage?since=7d&by=user`.
 */
import { gpuName } from './format';
import { IGpu, IUsageRow } from './api';
import { age, ClusterModel, IGpuReading } from './model';
import { el } from './dom';

/** "3h 02m", "12m", "40s": a GPU-time total. */
export function formatSeconds(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m`;
  }
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${h}h ${String(m).padStart(2, '0')}m`;
}

/** A held GPU that shows no utilisation, and since when (as far as this page has watched it). */
export interface IIdleGpu {
  gpu: IGpu;
  since: number | null;
}

/** GPUs held by a job whose last reading is 0 % (null readings: unknown, not idle). */
export function idleGpus(
  gpus: IGpu[],
  history: (gpu: IGpu) => IGpuReading[]
): IIdleGpu[] {
  const out: IIdleGpu[] = [];
  for (const gpu of gpus) {
    if (!gpu.job || gpu.utilization !== 0) {
      continue;
    }
    let since: number | null = null;
    const series = history(gpu);
    for (let i = series.length - 1; i >= 0; i--) {
      const r = series[i];
      if (r.job !== gpu.job || r.utilization !== 0) {
        break;
      }
      since = r.t;
    }
    out.push({ gpu, since });
  }
  return out.sort(
    (a, b) =>
      (a.since ?? Infinity) - (b.since ?? Infinity) ||
      (a.gpu.user ?? '').localeCompare(b.gpu.user ?? '')
  );
}

/** The user / VC selects above "All jobs" (admins). */
export class JobFilterBar {
  readonly node = el('div', 'jp-HivePanel-filters');

  constructor(private readonly model: ClusterModel) {
    this._user = el('select', 'jp-HivePanel-filterUser');
    this._user.title = 'Show the jobs of one user';
    this._user.onchange = () => model.setJobFilter({ user: this._user.value || null });
    this._vc = el('select', 'jp-HivePanel-filterVc');
    this._vc.title = 'Show the jobs of one virtual cluster';
    this._vc.onchange = () => model.setJobFilter({ vc: this._vc.value || null });
    const user = el('label', undefined, 'user ');
    user.appendChild(this._user);
    const vc = el('label', undefined, 'VC ');
    vc.appendChild(this._vc);
    this.node.append(user, vc);
  }

  render(): void {
    const m = this.model;
    fill(this._user, 'all users', [...m.knownUsers].sort(), m.jobFilter.user);
    fill(
      this._vc,
      'all VCs',
      m.vcs.map(v => v.name),
      m.jobFilter.vc
    );
  }

  private _user: HTMLSelectElement;
  private _vc: HTMLSelectElement;
}

/** Replaces a select's options unless they are already these (keeps focus and the open list). */
function fill(
  select: HTMLSelectElement,
  allLabel: string,
  values: string[],
  current: string | null
): void {
  const wanted = ['', ...values];
  if (current && !values.includes(current)) {
    wanted.push(current);
  }
  const have = Array.from(select.options).map(o => o.value);
  if (have.join('\u0000') !== wanted.join('\u0000')) {
    select.replaceChildren(
      ...wanted.map(value => {
        const option = el('option', undefined, value || allLabel);
        option.value = value;
        return option;
      })
    );
  }
  select.value = current ?? '';
}

/** Idle GPUs and the usage table, below the job list (admins). */
export class InstructorView {
  readonly node = el('div', 'jp-HivePanel-instructor');

  constructor(private readonly model: ClusterModel) {
    this._idle = el('div', 'jp-HivePanel-idle');
    this._usageTitle = el('h3', 'jp-HivePanel-section', 'Usage, last 7 days');
    this._usage = el('div', 'jp-HivePanel-usage');
    this.node.append(
      el('h3', 'jp-HivePanel-section', 'GPUs held idle'),
      this._idle,
      this._usageTitle,
      this._usage
    );
    this.node.hidden = true;
  }

  dispose(): void {
    if (this._watching) {
      this.model.watchSamples(false);
      this._watching = false;
    }
  }

  /** The panel is shown / hidden: GPU readings are polled only while an admin looks. */
  setShown(shown: boolean): void {
    this._shown = shown;
    this.render();
  }

  render(): void {
    const m = this.model;
    const admin = !!m.me?.admin && !!m.me?.shared; // a lone user's own server has nobody to look after
    this.node.hidden = !admin;
    const watch = admin && this._shown;
    if (watch !== this._watching) {
      this._watching = watch; // readings arrive while the instructor looks: idle since when
      m.watchSamples(watch);
    }
    if (!admin) {
      return;
    }
    this._renderIdle();
    const vc = m.jobFilter.vc;
    if (vc !== this._usageVc || Date.now() - this._usageAt > 30000) {
      void this._loadUsage(vc);
    }
  }

  private _renderIdle(): void {
    const gpus = this.model.cluster?.gpus ?? [];
    const vc = this.model.jobFilter.vc;
    const user = this.model.jobFilter.user;
    const held = gpus.filter(
      g => g.job && (!user || g.user === user) && (!vc || g.vc === vc || this._jobVc(g.job) === vc)
    );
    const list = el('ul', 'jp-HivePanel-idleList');
    if (held.length > 0 && held.every(g => g.utilization === null || g.utilization === undefined)) {
      list.appendChild(
        el('li', 'jp-HivePanel-empty', 'No utilisation readings: the GPU sampler does not see these GPUs.')
      );
      this._idle.replaceChildren(list);
      return;
    }
    const now = Date.now();
    const idle = idleGpus(held, g => this.model.history(g.node, g.index));
    for (const { gpu, since } of idle) {
      const item = el('li', 'jp-HivePanel-idleGpu');
      item.dataset.user = gpu.user ?? '';
      item.dataset.job = gpu.job ?? '';
      item.append(
        el('span', 'jp-HivePanel-user', gpu.user ?? '?'),
        el('span', 'jp-HivePanel-jobId', gpu.job ?? ''),
        el('span', 'jp-HivePanel-idleGpuName', gpuName(gpu.node, gpu.index)),
        el(
          'span',
          'jp-HivePanel-idleFor',
          since === null ? '0%' : `0% for ${age(new Date(since).toISOString(), now)}`
        )
      );
      list.appendChild(item);
    }
    if (idle.length === 0) {
      list.appendChild(
        el('li', 'jp-HivePanel-empty', held.length ? 'Every held GPU is busy.' : 'No GPU is held.')
      );
    }
    this._idle.replaceChildren(list);
  }

  private _jobVc(id: string): string | undefined {
    return this.model.allJobs.find(j => j.id === id)?.vc;
  }

  private async _loadUsage(vc: string | null): Promise<void> {
    this._usageVc = vc;
    this._usageAt = Date.now();
    let answer: { rows: IUsageRow[]; vc: string | null } | null;
    try {
      answer = await this.model.api.usage('7d', vc);
    } catch (error) {
      this._usage.replaceChildren(
        el('div', 'jp-HivePanel-error', `usage: ${(error as Error).message}`)
      );
      return;
    }
    if (this._usageVc !== vc) {
      return; // the filter changed meanwhile: that answer is loading
    }
    if (answer === null) {
      const none = el('div', 'jp-HivePanel-empty jp-HivePanel-usageNone', 'usage not available');
      none.title = 'This server does not answer GET usage (accounting is off or too old)';
      this._usage.replaceChildren(none);
      this._usageTitle.textContent = 'Usage, last 7 days';
      return;
    }
    this._usageTitle.textContent = `Usage, last 7 days${answer.vc ? ` in ${answer.vc}` : ', every VC'}`;
    const table = el('table', 'jp-HivePanel-table jp-HivePanel-usageTable');
    const head = el('tr');
    for (const title of ['user', 'GPU time', 'CPU time', 'jobs']) {
      head.appendChild(el('th', undefined, title));
    }
    table.appendChild(head);
    const rows = answer.rows.slice().sort((a, b) => b.gpu_seconds - a.gpu_seconds || (a.user ?? '').localeCompare(b.user ?? ''));
    for (const row of rows) {
      const tr = el('tr', 'jp-HivePanel-usageRow');
      tr.dataset.user = row.user ?? '';
      tr.dataset.gpuSeconds = String(row.gpu_seconds);
      tr.append(
        el('td', 'jp-HivePanel-user', row.user ?? ''),
        el('td', undefined, formatSeconds(row.gpu_seconds)),
        el('td', undefined, row.cpu_seconds === null || row.cpu_seconds === undefined ? '—' : formatSeconds(row.cpu_seconds)),
        el('td', undefined, row.jobs === undefined ? '—' : String(row.jobs))
      );
      table.appendChild(tr);
    }
    if (rows.length === 0) {
      const tr = el('tr');
      const td = el('td', 'jp-HivePanel-empty', 'No usage in the last 7 days.');
      td.colSpan = 4;
      tr.appendChild(td);
      table.appendChild(tr);
    }
    this._usage.replaceChildren(table);
  }

  private _idle: HTMLDivElement;
  private _usage: HTMLDivElement;
  private _usageTitle: HTMLHeadingElement;
  private _usageVc: string | null | undefined = undefined;
  private _usageAt = 0;
  private _watching = false;
  private _shown = false;
}
