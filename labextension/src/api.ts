/**
 * Typed access to the hive-lab REST API (docs/rest-api.md) through JupyterLab's
 * ServerConnection, so every request carries the session's token/cookie and _xsrf.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export type JobState =
  | 'submitted'
  | 'queued'
  | 'scheduled'
  | 'running'
  | 'paused'
  | 'succeeded'
  | 'failed'
  | 'cancelled';

export const ACTIVE_STATES: ReadonlySet<string> = new Set([
  'submitted',
  'queued',
  'scheduled',
  'running',
  'paused'
]);

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
  priority: number;
  opportunistic: boolean;
  gpus: number;
  gpu_type: string | null;
  submitted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  placement?: IPlacement[];
}

export interface IJobList {
  jobs: IJob[];
  total: number;
  limit: number;
  offset: number;
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
  bad: boolean;
  drained: boolean;
  path: string[];
}

export interface ICluster {
  gpus_total: number;
  gpus_free: number;
  gpus: IGpu[];
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

export interface IMe {
  user: string;
  admin: boolean;
  vcs: string[];
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

  submit(spec: Record<string, unknown>): Promise<IJob> {
    return this.request<IJob>('jobs', {
      method: 'POST',
      body: JSON.stringify(spec)
    });
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

  /** Opens the `events` websocket, authenticated like the kernel websockets. */
  openEvents(): WebSocket {
    let url = URLExt.join(this.settings.wsUrl, 'hive_lab', 'api', 'events');
    if (this.settings.token) {
      url += `?token=${encodeURIComponent(this.settings.token)}`;
    }
    return new this.settings.WebSocket(url);
  }
}
