/**
 * Typed access to the hive-lab REST API (docs/rest-api.md) through JupyterLab's
 * ServerConnection, so every request carries the session's token/cookie and _xsrf.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { JOB_STATES, PLACED_STATES, WAITING_STATES } from './jobStates';
import {
  IArray,
  ICluster,
  IJob,
  IJobList,
  ILimits,
  ILogChunk,
  IMe,
  IUsageRow,
  IVc
} from './wire';

// the state vocabulary is generated from the service's (jobStates.ts); kept importable from here
export type { JobState } from './jobStates';
export { ACTIVE_STATES } from './jobStates';
// the answers' types are generated from the server's response models (wire.ts); kept importable from here
export type {
  IArray,
  IArrayElement,
  ICluster,
  IGpu,
  IGpuShare,
  IJob,
  IJobList,
  ILimits,
  ILogChunk,
  IMe,
  IPlacement,
  IProgress,
  IUsageRow,
  IVc
} from './wire';

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

/** "2 GPUs, 1 kernel" (empty when no limit is set; a missing key or null is no limit). */
export function describeLimits(limits: ILimits | undefined): string {
  if (!limits) {
    return '';
  }
  const parts: string[] = [];
  if (limits.max_gpus !== undefined && limits.max_gpus !== null) {
    parts.push(plural(limits.max_gpus, 'GPU'));
  }
  if (limits.max_kernels !== undefined && limits.max_kernels !== null) {
    parts.push(plural(limits.max_kernels, 'kernel'));
  }
  if (limits.max_running_jobs !== undefined && limits.max_running_jobs !== null) {
    parts.push(plural(limits.max_running_jobs, 'running job'));
  }
  if (limits.max_queued_jobs !== undefined && limits.max_queued_jobs !== null) {
    parts.push(plural(limits.max_queued_jobs, 'queued job'));
  }
  if (limits.max_priority !== undefined && limits.max_priority !== null) {
    parts.push(`priority ≤ ${limits.max_priority}`);
  }
  if (limits.max_time_limit_s !== undefined && limits.max_time_limit_s !== null) {
    parts.push(`≤ ${duration(limits.max_time_limit_s)} per job`);
  }
  return parts.join(', ');
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
