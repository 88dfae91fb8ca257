/**
 * Typed access to the hive-lab REST API (docs/rest-api.md) through JupyterLab's
 * ServerConnection, so every request carries the session's token/cookie and _xsrf.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { JobState, JOB_STATES, PLACED_STATES, WAITING_STATES } from './jobStates';

// the state vocabulary is generated from the service's (jobStates.ts); kept importable from here
export type { JobState } from './jobStates';
export { ACTIVE_STATES } from './jobStates';

export interface IPlacement {
  task: string;
  node: string;
  gpus: number[];
  gpu_uuids?: string[];
}

export interface IJob {
  id: string;
  name: string;
  user: string;
  vc: string;
  kind: string;
  state: JobState | string;
  reason: string | null;
  /** queued: when the scheduler's forward simulation expects it to start (null: unknown) */
  estimated_start?: string | null;
  /** queued: one line saying what the estimate rests on */
  estimated_start_basis?: string | null;
  priority: number;
  opportunistic: boolean;
  gpus: number;
  gpu_type: string | null;
  submitted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  placement?: IPlacement[];
  /** run time limit in seconds (null: none); deadline/time_left_s while running with one */
  time_limit_s?: number | null;
  deadline?: string | null;
  time_left_s?: number | null;
  /** what the job reported with hive_lab.progress (docs/checkpoint.md) */
  progress?: IProgress | null;
  /** an element of this job array (absent otherwise) */
  array_id?: string | null;
  array_index?: number | null;
}

export interface IProgress {
  steps: number | null;
  total_steps?: number | null;
  gpu_type?: string | null;
  rates?: { [gpuType: string]: { steps_per_s: number | null; seconds?: number } };
  estimated_finish?: number | null;
}

/** One element of a job array: `pending` until released as a job. */
export interface IArrayElement {
  index: number;
  job_id: string | null;
  state: string;
  reason: string;
  exit_code: number | null;
  params: Record<string, unknown> | null;
}

/** A job array or sweep (`GET arrays`, `GET arrays/{id}` with a page of `elements`). */
export interface IArray {
  id: string;
  name: string;
  user: string;
  vc: string;
  state: 'waiting' | 'running' | 'held' | 'ended';
  reason: string;
  count: number;
  throttle: number | null;
  held: boolean;
  counts: Record<string, number>;
  submitted_at: string;
  elements?: IArrayElement[];
}

/**
 * The states an array's counts are shown in: those that hold GPUs first, then those waiting (the job
 * states in reverse, from jobStates.ts), elements not released yet ('pending'), then the rest in order.
 */
export const ARRAY_COUNT_ORDER: string[] = [
  ...JOB_STATES.filter(s => PLACED_STATES.has(s)).reverse(),
  ...JOB_STATES.filter(s => WAITING_STATES.has(s)).reverse(),
  'pending',
  ...JOB_STATES.filter(s => !PLACED_STATES.has(s) && !WAITING_STATES.has(s))
];

/** "3 running, 7 pending" (only the states with elements). */
export function arrayCountsText(counts: Record<string, number>): string {
  return ARRAY_COUNT_ORDER.filter(s => counts[s])
    .map(s => `${counts[s]} ${s}`)
    .join(', ');
}

export interface IJobList {
  jobs: IJob[];
  total: number;
  limit: number;
  offset: number;
  /** The cursor of the next page (send `after=<next>`); null on the last page. */
  next?: number | null;
}

export interface IGpu {
  node: string;
  index: number;
  uuid: string | null;
  type: string | null;
  state: string;
  vc: string | null;
  job: string | null;
  user: string | null;
  opportunistic: boolean;
  utilization: number | null;
  memory_used_mb: number | null;
  memory_total_mb?: number | null;
  bad: boolean;
  drained: boolean;
  path: string[];
  /** A shared GPU: its shares (0.5 / 0.25 / 0.125) and who holds each. */
  shares?: IGpuShare[] | null;
  free_share?: number | null;
}

export interface IGpuShare {
  job: string;
  user: string | null;
  /** Its first eighth of the GPU. */
  slot: number;
  share: number;
  /** Its job's own GPU utilisation in percent; null when not measured. */
  utilization?: number | null;
}

export interface ICluster {
  gpus_total: number;
  gpus_free: number;
  gpus: IGpu[];
  /** Where the GPUs come from; `simulated`: jobs run here and this machine has no GPU. */
  hardware?: { source: string; gpus_seen_here: number; simulated: boolean } | null;
}

export interface IVc {
  name: string;
  guaranteed_gpus: number;
  used_gpus: number;
  opportunistic_gpus: number;
  doomed_gpus: number;
  queue_length: number;
  running_jobs: number;
  mine: boolean;
}

/** Per-user limits in one VC (only the keys that are set; docs/rest-api.md). */
export interface ILimits {
  max_gpus?: number;
  max_running_jobs?: number;
  max_kernels?: number;
  max_queued_jobs?: number;
  max_priority?: number;
  max_time_limit_s?: number;
}

export interface IMe {
  user: string;
  admin: boolean;
  vcs: string[];
  /** VC -> the caller's limits in effect there. */
  limits?: { [vc: string]: ILimits };
  /** The server serves several people (JupyterHub, a token map): admin sections are shown only then. */
  shared?: boolean;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function duration(s: number): string {
  if (s >= 3600 && s % 3600 === 0) {
    return `${s / 3600} h`;
  }
  if (s >= 60 && s % 60 === 0) {
    return `${s / 60} min`;
  }
  return `${s} s`;
}

/** "2 GPUs, 1 kernel" (empty when no limit is set). */
export function describeLimits(limits: ILimits | undefined): string {
  if (!limits) {
    return '';
  }
  const parts: string[] = [];
  if (limits.max_gpus !== undefined) {
    parts.push(plural(limits.max_gpus, 'GPU'));
  }
  if (limits.max_kernels !== undefined) {
    parts.push(plural(limits.max_kernels, 'kernel'));
  }
  if (limits.max_running_jobs !== undefined) {
    parts.push(plural(limits.max_running_jobs, 'running job'));
  }
  if (limits.max_queued_jobs !== undefined) {
    parts.push(plural(limits.max_queued_jobs, 'queued job'));
  }
  if (limits.max_priority !== undefined) {
    parts.push(`priority ≤ ${limits.max_priority}`);
  }
  if (limits.max_time_limit_s !== undefined) {
    parts.push(`≤ ${duration(limits.max_time_limit_s)} per job`);
  }
  return parts.join(', ');
}

/** One row of `GET usage?since=7d&by=user` (the accounting contract of issue 14). */
export interface IUsageRow {
  user: string;
  gpu_seconds: number;
  cpu_seconds?: number;
  jobs?: number;
}

export interface ILogChunk {
  task: string;
  tasks: string[];
  offset: number;
  next_offset: number;
  data: string;
  eof: boolean;
}

/** An error answered by the API: carries the server's sentence saying what to change. */
export class HiveApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field: string | null = null
  ) {
    super(message);
  }
}

export class HiveApi {
  constructor(
    readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** Absolute URL of an API path such as `jobs?user=me`. */
  url(path: string): string {
    return URLExt.join(this.settings.baseUrl, 'hive_lab', 'api') + '/' + path;
  }

  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(
        this.url(path),
        init,
        this.settings
      );
    } catch (error) {
      throw new ServerConnection.NetworkError(error as TypeError);
    }
    const text = await response.text();
    let data: any = text;
    if (text.length > 0) {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    if (!response.ok) {
      const message =
        (data && (data.error || data.message)) ||
        `${response.status} ${response.statusText}`;
      throw new HiveApiError(response.status, String(message), data?.field ?? null);
    }
    return data as T;
  }

  me(): Promise<IMe> {
    return this.request<IMe>('me');
  }

  cluster(): Promise<ICluster> {
    return this.request<ICluster>('cluster');
  }

  async vcs(): Promise<IVc[]> {
    return (await this.request<{ vcs: IVc[] }>('vcs')).vcs;
  }

  jobs(query: Record<string, string | number> = {}): Promise<IJobList> {
    const qs = Object.entries(query)
      .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
      .join('&');
    return this.request<IJobList>(qs ? `jobs?${qs}` : 'jobs');
  }

  /**
   * Per-user usage (`rows`, and the VC they were restricted to, null: every VC); null where the
   * server has no usage endpoint (404). A server that refuses the `vc` filter (400) is asked for
   * every VC, and `vc` in the answer says so.
   */
  async usage(
    since = '7d',
    vc: string | null = null
  ): Promise<{ rows: IUsageRow[]; vc: string | null } | null> {
    const query = `usage?since=${encodeURIComponent(since)}&by=user`;
    try {
      const answer = await this.request<{ rows: IUsageRow[] }>(
        vc ? `${query}&vc=${encodeURIComponent(vc)}` : query
      );
      return { rows: answer.rows ?? [], vc };
    } catch (error) {
      if (error instanceof HiveApiError && error.status === 404) {
        return null;
      }
      if (vc && error instanceof HiveApiError && error.status === 400) {
        return this.usage(since, null);
      }
      throw error;
    }
  }

  submit(spec: Record<string, unknown>): Promise<IJob> {
    return this.request<IJob>('jobs', {
      method: 'POST',
      // a string body is text/plain to fetch(): say it is JSON (POST jobs also reads scripts and YAML)
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(spec)
    });
  }

  /**
   * A job file sent as it is (an OpenPAI job, an sbatch script, a Kubernetes/Volcano manifest or
   * hive-lab's own spec): the server reads its format. Answers the job, or the array (`#SBATCH --array`).
   */
  /**
   * Send a job file as it is. `noImage` (`--no-image`, a server without containers): the images it
   * names are not applied (the job lists them as such) and its commands run as processes.
   */
  submitFile(text: string, contentType: string, noImage = false): Promise<IJob & Partial<IArray>> {
    return this.request<IJob & Partial<IArray>>(noImage ? 'jobs?no_image=true' : 'jobs', {
      method: 'POST',
      headers: { 'Content-Type': contentType },
      body: text
    });
  }

  /** My arrays (newest first); [] from a server without arrays (404). */
  async arrays(limit = 50): Promise<IArray[]> {
    try {
      return (await this.request<{ arrays: IArray[] }>(`arrays?user=me&limit=${limit}`)).arrays;
    } catch (error) {
      if (error instanceof HiveApiError && error.status === 404) {
        return [];
      }
      throw error;
    }
  }

  array(id: string, limit = 200): Promise<IArray> {
    return this.request<IArray>(`arrays/${encodeURIComponent(id)}?limit=${limit}`);
  }

  cancelArray(id: string): Promise<IArray> {
    return this.request<IArray>(`arrays/${encodeURIComponent(id)}`, { method: 'DELETE' });
  }

  cancel(id: string): Promise<IJob> {
    return this.request<IJob>(`jobs/${encodeURIComponent(id)}`, {
      method: 'DELETE'
    });
  }

  logs(id: string, task: string | null, offset: number): Promise<ILogChunk> {
    const params = [`offset=${offset}`];
    if (task) {
      params.push(`task=${encodeURIComponent(task)}`);
    }
    return this.request<ILogChunk>(
      `jobs/${encodeURIComponent(id)}/logs?${params.join('&')}`
    );
  }

  /**
   * Opens the `events` websocket, authenticated like the kernel websockets. `since`: the `seq` of
   * the last message read; the server replays the state changes after it (or sends `snapshot`).
   */
  openEvents(since: number | null = null): WebSocket {
    let url = URLExt.join(this.settings.wsUrl, 'hive_lab', 'api', 'events');
    const query: string[] = [];
    if (this.settings.token) {
      query.push(`token=${encodeURIComponent(this.settings.token)}`);
    }
    if (since !== null) {
      query.push(`since=${since}`);
    }
    if (query.length) {
      url += `?${query.join('&')}`;
    }
    return new this.settings.WebSocket(url);
  }
}
