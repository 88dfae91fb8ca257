/**
 * The shared client-side state of the cluster (jobs, VCs, GPUs) that the panel, the heatmap
 * and the status bar render. Kept fresh by the `events` websocket, with a periodic refetch
 * as the fallback when the socket is down or a message was missed.
 */
import { ISignal, Signal } from '@lumino/signaling';

import {
  ACTIVE_STATES,
  HiveApi,
  IArray,
  ICluster,
  IGpu,
  IJob,
  IMe,
  IVc
} from './api';
import { ageText } from './format';
import { WAITING_STATES } from './jobStates';

export type ColorMode = 'vc' | 'job' | 'state' | 'user';

export interface IHiveSettings {
  refreshInterval: number;
  colorMode: ColorMode;
  /** Seconds between GPU readings while a utilisation chart is open. */
  chartInterval: number;
}

export const DEFAULT_SETTINGS: IHiveSettings = {
  refreshInterval: 10,
  colorMode: 'vc',
  chartInterval: 5
};

/** One reading of a GPU, as `GET cluster` gave it (time: the browser's clock when it arrived). */
export interface IGpuReading {
  t: number;
  utilization: number | null;
  memoryUsedMb: number | null;
  memoryTotalMb: number | null;
  job: string | null;
}

/** Readings kept per GPU for the charts (at 5 s, ten minutes). */
export const HISTORY_LENGTH = 120;

/** The "All jobs" filter (admins): one user, one VC, or null for every one. */
export interface IJobFilter {
  user: string | null;
  vc: string | null;
}

export function gpuKey(node: string, index: number): string {
  return `${node}#${index}`;
}

export class ClusterModel {
  constructor(readonly api: HiveApi = new HiveApi()) {}

  me: IMe | null = null;
  myJobs: IJob[] = [];
  /** My job arrays: one row each in "My jobs" (their elements are left out of myJobs). */
  myArrays: IArray[] = [];
  allJobs: IJob[] = [];
  allJobsTotal = 0;
  vcs: IVc[] = [];
  cluster: ICluster | null = null;
  gpusFree: number | null = null;
  gpusTotal: number | null = null;
  error: string | null = null;
  connected = false;
  /** The first refresh answered (jobs, VCs and who I am are known). */
  loaded = false;
  settings: IHiveSettings = { ...DEFAULT_SETTINGS };
  jobFilter: IJobFilter = { user: null, vc: null };
  /** Every user seen in a job list or on a GPU (the filter's choices). */
  knownUsers = new Set<string>();

  /** Emitted after jobs, VCs or counts changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted after the per-GPU cluster view changed (heatmap). */
  get clusterChanged(): ISignal<this, void> {
    return this._clusterChanged;
  }

  /** Emitted after the user's settings changed. */
  get settingsChanged(): ISignal<this, IHiveSettings> {
    return this._settingsChanged;
  }

  /** Emitted when a job object arrives over the event stream. */
  get jobEvent(): ISignal<this, IJob> {
    return this._jobEvent;
  }

  get myQueued(): number {
    return this.myJobs.filter(j => WAITING_STATES.has(j.state))
      .length;
  }

  /** The readings of one GPU, oldest first. */
  history(node: string, index: number): IGpuReading[] {
    return this._history.get(gpuKey(node, index)) ?? [];
  }

  /** The caller's GPUs (held by their jobs) in the last `GET cluster` answer. */
  get myGpus(): IGpu[] {
    const me = this.me?.user;
    return me ? (this.cluster?.gpus ?? []).filter(g => g.job && g.user === me) : [];
  }

  /** Changes the "All jobs" filter; the list is refetched with it (server-side filter). */
  setJobFilter(filter: Partial<IJobFilter>): void {
    this.jobFilter = { ...this.jobFilter, ...filter };
    void this.refresh(false);
  }

  /** A chart is open: `GET cluster` every `chartInterval` seconds while at least one is. */
  watchSamples(on: boolean): void {
    this._sampleWatchers += on ? 1 : -1;
    if (on && this._sampleWatchers === 1) {
      this.watchCluster(true);
      this._sampleLater();
    } else if (!on && this._sampleWatchers === 0) {
      this.watchCluster(false);
      window.clearTimeout(this._sampleTimer);
    }
  }

  /** Starts the event stream and the fallback refresh. Idempotent. */
  start(): void {
    if (this._started) {
      return;
    }
    this._started = true;
    void this.refresh();
    this._connect();
    this._schedule();
  }

  dispose(): void {
    this._disposed = true;
    window.clearTimeout(this._timer);
    window.clearTimeout(this._debounce);
    window.clearTimeout(this._clusterDebounce);
    window.clearTimeout(this._sampleTimer);
    this._socket?.close();
    Signal.clearData(this);
  }

  updateSettings(settings: Partial<IHiveSettings>): void {
    const before = this.settings.refreshInterval;
    this.settings = { ...this.settings, ...settings };
    if (this._started && before !== this.settings.refreshInterval) {
      this._schedule();
    }
    if (this._sampleWatchers > 0) {
      this._sampleLater();
    }
    this._settingsChanged.emit(this.settings);
    this._changed.emit();
  }

  /** The heatmap asks for per-GPU data; only then is `GET cluster` polled. */
  watchCluster(on: boolean): void {
    this._clusterWatchers += on ? 1 : -1;
    if (on && this._clusterWatchers === 1) {
      void this.refreshCluster();
    }
  }

  /**
   * Refetches jobs and VCs, and the per-GPU view when it is needed: while the heatmap is open,
   * before the first counts arrive, or when the event stream (which pushes the counts) is down.
   * For big clusters `GET cluster` is megabytes, so it is not fetched just for the status bar.
   */
  async refresh(withCluster?: boolean): Promise<void> {
    const fetchCluster =
      withCluster ?? (!this.connected || this.gpusTotal === null || this._clusterWatchers > 0);
    try {
      if (!this.me) {
        this.me = await this.api.me();
      }
      const filter: Record<string, string | number> = { limit: 200 };
      if (this.jobFilter.user) {
        filter.user = this.jobFilter.user;
      }
      if (this.jobFilter.vc) {
        filter.vc = this.jobFilter.vc;
      }
      // `me` again each time: an admin may change the caller's limits at run time
      const [me, mine, all, vcs, cluster, arrays] = await Promise.all([
        this.api.me(),
        this.api.jobs({ user: 'me', limit: 200, elements: 'false' }),
        this.api.jobs(filter),
        this.api.vcs(),
        fetchCluster ? this.api.cluster() : Promise.resolve(null),
        this.api.arrays()
      ]);
      this.myArrays = arrays;
      this.myJobs = sortJobs(mine.jobs);
      this.allJobs = sortJobs(all.jobs);
      this.allJobsTotal = all.total;
      for (const job of all.jobs) {
        this.knownUsers.add(job.user);
      }
      this.vcs = vcs;
      this.me = me;
      this.loaded = true;
      if (cluster) {
        this._setCluster(cluster);
      }
      this.error = null;
    } catch (error) {
      this.error = (error as Error).message;
    }
    this._changed.emit();
  }

  async refreshCluster(): Promise<void> {
    try {
      this._setCluster(await this.api.cluster());
      this.error = null;
    } catch (error) {
      this.error = (error as Error).message;
    }
    this._changed.emit();
  }

  async cancel(id: string): Promise<void> {
    const job = await this.api.cancel(id);
    this._applyJob(job);
    this._refreshSoon();
  }

  private _setCluster(cluster: ICluster): void {
    this.cluster = cluster;
    this._record(cluster);
    this.gpusFree = cluster.gpus_free;
    this.gpusTotal = cluster.gpus_total;
    this._clusterChanged.emit();
  }

  /** Appends this answer's readings of the GPUs that hold a job (free GPUs have no chart). */
  private _record(cluster: ICluster): void {
    const t = Date.now();
    for (const gpu of cluster.gpus) {
      if (gpu.user) {
        this.knownUsers.add(gpu.user);
      }
      const key = gpuKey(gpu.node, gpu.index);
      let series = this._history.get(key);
      if (!gpu.job && !series) {
        continue;
      }
      if (!series) {
        series = [];
        this._history.set(key, series);
      }
      series.push({
        t,
        utilization: gpu.utilization ?? null,
        memoryUsedMb: gpu.memory_used_mb ?? null,
        memoryTotalMb: gpu.memory_total_mb ?? null,
        job: gpu.job ?? null
      });
      if (series.length > HISTORY_LENGTH) {
        series.splice(0, series.length - HISTORY_LENGTH);
      }
    }
  }

  private _sampleLater(): void {
    window.clearTimeout(this._sampleTimer);
    if (this._disposed || this._sampleWatchers <= 0) {
      return;
    }
    const seconds = Math.max(1, this.settings.chartInterval || 5);
    this._sampleTimer = window.setTimeout(async () => {
      await this.refreshCluster();
      this._sampleLater();
    }, seconds * 1000);
  }

  private _schedule(): void {
    window.clearTimeout(this._timer);
    if (this._disposed) {
      return;
    }
    const seconds = Math.max(1, this.settings.refreshInterval || 10);
    this._timer = window.setTimeout(async () => {
      await this.refresh();
      this._schedule();
    }, seconds * 1000);
  }

  private _connect(): void {
    if (this._disposed) {
      return;
    }
    let socket: WebSocket;
    try {
      socket = this.api.openEvents(this._lastSeq);
    } catch (error) {
      this._reconnectLater();
      return;
    }
    this._socket = socket;
    socket.onopen = () => {
      this.connected = true;
      this._backoff = 1000;
      this._changed.emit();
    };
    socket.onmessage = event => {
      let message: any;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      this._onMessage(message);
    };
    socket.onclose = () => {
      this.connected = false;
      this._socket = null;
      this._changed.emit();
      this._reconnectLater();
    };
  }

  private _reconnectLater(): void {
    if (this._disposed) {
      return;
    }
    window.setTimeout(() => this._connect(), this._backoff);
    this._backoff = Math.min(this._backoff * 2, 30000);
  }

  private _onMessage(message: any): void {
    // every message carries seq; a reconnect resumes after the last one (a snapshot restarts the count)
    if (typeof message?.seq === 'number') {
      if (
        message.type === 'snapshot' ||
        this._lastSeq === null ||
        message.seq > this._lastSeq
      ) {
        this._lastSeq = message.seq;
      }
    }
    switch (message?.type) {
      case 'hello':
      case 'snapshot':
        // events may have been missed (first connect, or the server could not replay): refetch
        this._refreshSoon();
        this._refreshClusterSoon();
        break;
      case 'state':
        // a stored state change (live, or replayed after a reconnect): the lists catch up
        this._refreshSoon();
        break;
      case 'job':
        if (message.job) {
          this._applyJob(message.job as IJob);
          this._jobEvent.emit(message.job as IJob);
        }
        this._refreshSoon();
        this._refreshClusterSoon();
        break;
      case 'cluster':
        this.gpusFree = message.gpus_free;
        this.gpusTotal = message.gpus_total;
        this._changed.emit();
        this._refreshClusterSoon();
        break;
      case 'vcs':
      case 'estimates':
        // VC usage, or queued jobs' estimated starts, changed: the lists catch up
        this._refreshSoon();
        break;
      default:
        break;
    }
  }

  /** Patches a job into the lists at once, before the debounced refetch confirms it. */
  private _applyJob(job: IJob): void {
    const patch = (list: IJob[], include: boolean): IJob[] => {
      const index = list.findIndex(j => j.id === job.id);
      if (index >= 0) {
        const copy = list.slice();
        copy[index] = { ...list[index], ...job };
        return copy;
      }
      return include ? sortJobs([job, ...list]) : list;
    };
    const f = this.jobFilter;
    this.allJobs = patch(
      this.allJobs,
      (!f.user || f.user === job.user) && (!f.vc || f.vc === job.vc)
    );
    // an array's element is not a row of its own: the refetch brings its array's new counts
    this.myJobs = patch(this.myJobs, !!this.me && job.user === this.me.user && !job.array_id);
    this._changed.emit();
  }

  /**
   * One refetch 250 ms after the first message of a burst, however many follow: a timer restarted by each
   * message never fired while messages kept coming (a sweep's elements ending one after another left the
   * panel as it was until the last one, and its notice was never given).
   */
  private _refreshSoon(): void {
    if (this._debounce) {
      return;
    }
    // The per-GPU view follows events through _refreshClusterSoon; counts come with the events.
    this._debounce = window.setTimeout(() => {
      this._debounce = 0;
      void this.refresh(this.gpusTotal === null);
    }, 250);
  }

  private _refreshClusterSoon(): void {
    if (this._clusterWatchers <= 0 || this._clusterDebounce) {
      return;
    }
    this._clusterDebounce = window.setTimeout(() => {
      this._clusterDebounce = 0;
      void this.refreshCluster();
    }, 150);
  }

  private _changed = new Signal<this, void>(this);
  private _clusterChanged = new Signal<this, void>(this);
  private _jobEvent = new Signal<this, IJob>(this);
  private _settingsChanged = new Signal<this, IHiveSettings>(this);
  private _started = false;
  private _disposed = false;
  private _timer = 0;
  private _debounce = 0;
  private _clusterDebounce = 0;
  private _socket: WebSocket | null = null;
  private _lastSeq: number | null = null;
  private _backoff = 1000;
  private _clusterWatchers = 0;
  private _sampleWatchers = 0;
  private _sampleTimer = 0;
  private _history = new Map<string, IGpuReading[]>();
}

/** Active jobs first, newest first inside each group. */
export function sortJobs(jobs: IJob[]): IJob[] {
  return jobs.slice().sort((a, b) => {
    const active = Number(ACTIVE_STATES.has(b.state)) - Number(ACTIVE_STATES.has(a.state));
    if (active !== 0) {
      return active;
    }
    return (b.submitted_at ?? '').localeCompare(a.submitted_at ?? '') || b.id.localeCompare(a.id);
  });
}

/** `42 s`, `4 min 05 s` since an ISO time (whole seconds): hive_lab.format.age_text's words. */
export function age(iso: string | null, now: number = Date.now()): string {
  if (!iso) {
    return '';
  }
  return ageText(Math.max(0, (now - Date.parse(iso)) / 1000));
}
