/**
 * "Schedules" in the GPU cluster panel: my recurring jobs (an admin: everyone's) with their cron
 * expression, time zone, next run and last run (docs/pipelines.md). Fetched from `GET schedules`
 * when the panel's model changes (at most every few seconds) and on Refresh.
 */
import { whenText } from './format';
import { HiveApiError } from './api';
import { ClusterModel } from './model';

export interface IScheduleRun {
  due_at: string;
  fired_at: string;
  job_id: string | null;
  outcome: 'submitted' | 'skipped' | 'refused' | 'lost';
  reason: string;
}

export interface ISchedule {
  id: string;
  name: string;
  user: string;
  cron: string;
  timezone: string;
  policy: string;
  paused: boolean;
  next_run_at: string | null;
  /** The next run in the schedule's own zone, ISO 8601 with its offset (servers since issue 40). */
  next_run_local?: string | null;
  /** The cron expression in words, e.g. "every day at 00:00". */
  when?: string;
  runs: IScheduleRun[];
}

const MIN_FETCH_MS = 3000;

/** "2026-09-21 18:00 CEST" from an ISO time: local with zone, as every surface says times (format.whenText). */
export function shortTime(iso: string | null): string {
  return iso ? whenText(iso) : '';
}

/**
 * "2026-11-28 00:00 Europe/Berlin": the next run in the schedule's own zone (a `0 0 * * *` schedule in
 * Berlin is shown at midnight, not as 23:00 UTC); UTC from a server that does not send it.
 */
export function nextRunText(s: ISchedule): string {
  const local = s.next_run_local;
  const m = local ? /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)/.exec(local) : null;
  return m ? `${m[1]} ${m[2]} ${s.timezone}` : shortTime(s.next_run_at);
}

export function lastRunText(s: ISchedule): string {
  const last = s.runs[0];
  if (!last) {
    return 'no run yet';
  }
  return `last ${shortTime(last.due_at)}: ${last.job_id ?? last.outcome}`;
}

export class ScheduleList {
  readonly node: HTMLElement;

  constructor(private readonly _model: ClusterModel) {
    this.node = document.createElement('div');
    this.node.className = 'jp-HivePanel-schedules';
    _model.changed.connect(this._maybeFetch, this);
    void this.fetch();
  }

  dispose(): void {
    this._model.changed.disconnect(this._maybeFetch, this);
  }

  private _maybeFetch(): void {
    if (Date.now() - this._fetchedAt >= MIN_FETCH_MS) {
      void this.fetch();
    }
  }

  async fetch(): Promise<void> {
    this._fetchedAt = Date.now();
    try {
      const answer = await this._model.api.request<{ schedules: ISchedule[] }>('schedules');
      this.render(answer.schedules ?? []);
    } catch (error) {
      if (error instanceof HiveApiError && error.status === 404) {
        this.render([]); // a server without schedules
        return;
      }
      this.node.textContent = `schedules: ${(error as Error).message}`;
    }
  }

  render(schedules: ISchedule[]): void {
    this.node.replaceChildren();
    if (schedules.length === 0) {
      const none = document.createElement('div');
      none.className = 'jp-HivePanel-empty';
      none.textContent = 'No schedules (hive-lab schedules add --cron ...)';
      this.node.append(none);
      return;
    }
    const me = this._model.me?.user;
    for (const s of schedules) {
      const row = document.createElement('div');
      row.className = 'jp-HivePanel-schedule';
      row.dataset.scheduleId = s.id;
      const title = document.createElement('div');
      title.className = 'jp-HivePanel-scheduleTitle';
      title.textContent =
        `${s.name} · ${s.when || s.cron} (${s.timezone})` + (s.user !== me ? ` · ${s.user}` : '');
      const next = document.createElement('div');
      next.className = 'jp-HivePanel-scheduleNext';
      next.textContent = s.paused ? 'paused' : `next ${nextRunText(s)}`;
      const last = document.createElement('div');
      last.className = 'jp-HivePanel-scheduleLast';
      last.textContent = lastRunText(s);
      row.title = `${s.id}, cron ${s.cron}, policy ${s.policy}`;
      row.append(title, next, last);
      this.node.append(row);
    }
  }

  private _fetchedAt = 0;
}
