/**
 * The words numbers are said in, the same as hive_lab.format's (the CLI, the widgets, the cell lines):
 * one voice across every surface.
 */
import { FINAL_STATES, PENDING_STATES } from './jobStates.js';

/** `3.2 s`, `4 min 05 s`, `2 h 03 min`, `3 d 4 h`: hive_lab.format.duration's words. */
export function duration(seconds: number): string {
  if (seconds < 60) {
    // halves round up (floor(x + 0.5)), as hive_lab.format.duration's do
    return seconds < 10 ? `${(Math.floor(seconds * 10 + 0.5) / 10).toFixed(1)} s` : `${Math.floor(seconds + 0.5)} s`;
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) {
    return `${minutes} min ${pad(Math.floor(seconds) % 60)} s`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 24) {
    return `${hours} h ${pad(minutes % 60)} min`;
  }
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}


/** `1 GPU`, `2 A100 GPUs`, `0.5 GPU` (a share of one GPU), `0 GPUs`: hive_lab.format.gpus_text's words. */
export function gpusText(gpus: number | null | undefined, gpuType?: string | null): string {
  const n = Number(gpus ?? 0);
  const kind = gpuType ? ` ${gpuType}` : '';
  return `${n}${kind} GPU${n === 1 || (n > 0 && n < 1) ? '' : 's'}`;
}

/** The one word for idle GPUs lent to other VCs' opportunistic work: hive_lab.format.LENT_GPUS. */
export const LENT_GPUS = 'opportunistic';

/** One GPU, `node-0 GPU 3`: hive_lab.format.gpu_name (the heatmap's, the idle lists', the charts'). */
export function gpuName(node: string, index: number | string): string {
  return `${node} GPU ${index}`;
}

/** A node's GPUs, `node-0 GPU 2,3` / `node-0 GPU 0-7` / `node-0 (no GPU)`: hive_lab.format.gpu_list_text. */
export function gpuListText(node: string, all: number[]): string {
  const gpus = Array.from(new Set(all)).sort((a, b) => a - b);
  if (gpus.length === 0) {
    return `${node} (no GPU)`;
  }
  if (gpus.length > 2 && gpus[gpus.length - 1] - gpus[0] === gpus.length - 1) {
    return `${node} GPU ${gpus[0]}-${gpus[gpus.length - 1]}`;
  }
  return `${node} GPU ${gpus.join(',')}`;
}

/** The zone names the browser and the tz database agree on: hive_lab.format.ZONE_NAMES. */
const ZONE_NAMES = new Set([
  'UTC', 'GMT', 'BST', 'WET', 'WEST', 'CET', 'CEST', 'EET', 'EEST', 'EST',
  'EDT', 'CST', 'CDT', 'MST', 'MDT', 'PST', 'PDT', 'AKST', 'AKDT', 'HST'
]);

/** The local zone at `at`: `CET`, `UTC`, or the offset `UTC+5:30`: hive_lab.format.zone_text. */
export function zoneText(at: Date): string {
  for (const locale of ['en-GB', 'en-US']) {
    const name = new Intl.DateTimeFormat(locale, { timeZoneName: 'short' })
      .formatToParts(at)
      .find(p => p.type === 'timeZoneName')?.value;
    if (name && ZONE_NAMES.has(name)) {
      return name;
    }
  }
  const minutes = -at.getTimezoneOffset();
  const abs = Math.abs(minutes);
  const mins = abs % 60;
  return `UTC${minutes >= 0 ? '+' : '-'}${Math.floor(abs / 60)}${mins ? `:${String(mins).padStart(2, '0')}` : ''}`;
}

/** A moment as every surface says it, `2026-11-27 12:42 CET` (local, with zone); `-` when unknown: hive_lab.format.when_text. */
export function whenText(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') {
    return '-';
  }
  const at = new Date(typeof value === 'number' ? value * 1000 : value);
  if (isNaN(at.getTime())) {
    return String(value);
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  return (
    `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ` +
    `${pad(at.getHours())}:${pad(at.getMinutes())} ${zoneText(at)}`
  );
}

/** `node-0 GPU 2,3` / `node-0 GPU 0-7; node-1 GPU 0-7` / `node-0 (no GPU)`: hive_lab.format.placement_text's. */
export function placementText(placement: { node: string; gpus: number[] }[] | null | undefined): string {
  const byNode = new Map<string, number[]>();
  for (const task of placement ?? []) {
    byNode.set(task.node, [...(byNode.get(task.node) ?? []), ...(task.gpus ?? [])]);
  }
  return Array.from(byNode, ([node, all]) => gpuListText(node, all)).join('; ');
}

/**
 * The job fields these helpers read (a structural subset of api.IJob: this module imports only the
 * generated state sets, so tests run it under plain node against hive_lab.format, tests/client/test_one_voice.py).
 */
export interface IJobWords {
  id: string;
  name?: string | null;
  state: string;
  reason?: string | null;
  submitted_at?: string | null;
  started_at?: string | null;
  finished_at?: string | null;
  exit_code?: number | null;
  opportunistic?: boolean;
  placement?: { node: string; gpus: number[] }[] | null;
  estimated_start?: string | null;
  estimated_start_basis?: string | null;
  time_limit_s?: number | null;
  deadline?: string | null;
  time_left_s?: number | null;
  progress?: {
    steps?: number | null;
    total_steps?: number | null;
    gpu_type?: string | null;
    rates?: { [gpuType: string]: { steps_per_s?: number | null } };
    estimated_finish?: number | null;
  } | null;
}

// hive_lab.format's WAITING and FINISHED ('.js': node runs this module as it is, tests/client/test_one_voice.py)
const WAITING = PENDING_STATES;
const FINISHED = FINAL_STATES;

function secondsBetween(start: string | null | undefined, end: string | null | undefined, now: number): number | null {
  if (!start) {
    return null;
  }
  const b = end ? Date.parse(end) : now;
  return Math.max(0, (b - Date.parse(start)) / 1000);
}

/** An age in whole seconds (`42 s`, `4 min 05 s`): hive_lab.format.age_text's words. */
export function ageText(seconds: number | null): string {
  if (seconds === null) {
    return '-';
  }
  return seconds < 60 ? `${Math.floor(seconds + 0.5)} s` : duration(seconds);
}

/** `7200` -> `2h`, `5400` -> `1h30m`, `90` -> `1m30s`: hive_lab.format.limit_text (the server's names). */
export function limitShort(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) {
    return '-';
  }
  if (seconds < 60 && seconds !== Math.trunc(seconds)) {
    return `${seconds}s`;
  }
  let rest = Math.round(seconds);
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]] as [string, number][]) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n) {
      parts.push(`${n}${unit}`);
    }
  }
  return parts.join('') || '0s';
}

/** `2h` / `1 h 12 min left of 2h` (running, counted down to its deadline) / `-`: hive_lab.format.time_limit_text. */
export function timeLimitText(job: IJobWords, now: number): string {
  if (job.time_limit_s === null || job.time_limit_s === undefined) {
    return '-';
  }
  let left: number | null = null;
  if (job.deadline) {
    left = Math.max(0, (Date.parse(job.deadline) - now) / 1000);
  } else if (job.time_left_s !== null && job.time_left_s !== undefined) {
    left = job.time_left_s;
  }
  if (job.state === 'running' && left !== null) {
    return `${duration(left)} left of ${limitShort(job.time_limit_s)}`;
  }
  return limitShort(job.time_limit_s);
}

/**
 * A waiting job's estimated start: `starts in ~2 h 03 min (when j-000004 ends ...)`, `starts any moment`,
 * `start unknown (...)`; '' without an estimate: hive_lab.format.estimate_text.
 */
export function estimateText(job: IJobWords, now: number, basis = true): string {
  if (!WAITING.has(job.state) || job.estimated_start_basis === undefined || job.estimated_start_basis === null) {
    return '';
  }
  const why = job.estimated_start_basis;
  let text = 'start unknown';
  if (job.estimated_start) {
    const left = (Date.parse(job.estimated_start) - now) / 1000;
    text = left > 1 ? `starts in ~${duration(left)}` : 'starts any moment';
  }
  return text + (basis && why ? ` (${why})` : '');
}

/** `1230`, `4`, `0.25`: three significant digits, as Python's `float(f"{x:.3g}")` prints. */
export function threeDigits(x: number): string {
  return String(Number(x.toPrecision(3)));
}

/** `step 40 of 100, 4 steps/s, about 15 s left`; null before any report: hive_lab.format.progress_short. */
export function progressShort(job: IJobWords, now: number): string | null {
  const p = job.progress;
  if (!p || p.steps === null || p.steps === undefined) {
    return null;
  }
  let text = `step ${p.steps}` + (p.total_steps !== null && p.total_steps !== undefined ? ` of ${p.total_steps}` : '');
  const rates = p.rates ?? {};
  const rate =
    rates[p.gpu_type ?? '']?.steps_per_s ||
    Object.keys(rates)
      .sort()
      .map(k => rates[k].steps_per_s)
      .find(r => !!r);
  if (rate) {
    text += `, ${threeDigits(rate)} steps/s`;
  }
  if (p.estimated_finish !== null && p.estimated_finish !== undefined) {
    text += `, about ${duration(Math.max(0, p.estimated_finish - now / 1000))} left`;
  }
  return text;
}

/** One line saying where a job stands (`j-000017 train: running on node-0 GPU 2 for 4.1 s`): the cell's line. */
export function statusLine(job: IJobWords, now: number): string {
  const state = job.state;
  const head = `${job.id} ${job.name ?? ''}`.trimEnd() + ': ';
  let text: string;
  if (WAITING.has(state)) {
    const waited = secondsBetween(job.submitted_at, null, now);
    text = `${state} for ${waited === null ? '-' : duration(waited)}` + (job.reason ? ` — ${job.reason}` : '');
    const estimate = estimateText(job, now);
    if (estimate) {
      text += `; ${estimate}`;
    }
  } else if (state === 'running') {
    const where = placementText(job.placement);
    const ran = secondsBetween(job.started_at, null, now);
    text = 'running' + (where ? ` on ${where}` : '') + ` for ${ran === null ? '-' : duration(ran)}`;
    if (job.opportunistic) {
      text += ' (opportunistic)';
    }
    const limited = job.time_limit_s !== null && job.time_limit_s !== undefined;
    if (limited && (job.deadline || (job.time_left_s !== null && job.time_left_s !== undefined))) {
      text += `; ${timeLimitText(job, now)}`;
    }
    const moving = progressShort(job, now);
    if (moving) {
      text += `; ${moving}`;
    }
  } else if (FINISHED.has(state)) {
    const ran = secondsBetween(job.started_at, job.finished_at, now);
    text = state;
    if (job.exit_code !== null && job.exit_code !== undefined) {
      text += ` (exit code ${job.exit_code})`;
    }
    if (ran !== null) {
      text += ` after ${duration(ran)}`;
    }
    if (state !== 'succeeded' && job.reason) {
      text += ` — ${job.reason}`;
    }
  } else {
    text = state + (job.reason ? ` — ${job.reason}` : '');
  }
  return head + text;
}

/** The first letter in upper case: a line standing alone (`Starts in ~2 min`). */
export function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
