// Generated from hive_lab_server/wire/models.py by
//   python -m hive_lab_server.api.typescript labextension/src/wire.ts
// Do not edit: tests/server/api/test_wire_ts.py fails when this file and the Python drift.

import { JobState } from './jobStates';

/** Every 4xx/5xx: what to change, and the field it is about. */
export interface IError {
  /** a sentence saying what to change */
  error: string;
  /** the offending field, e.g. tasks[0].gpus, or null */
  field?: string | null;
}

export interface IPlacement {
  task: string;
  node: string;
  /** where the task's node is reached (Slurm NodeAddr; 127.0.0.1 for local/docker); a kernel's ZMQ ports listen there */
  address: string;
  gpus: number[];
  gpu_uuids?: string[] | null;
  /** a share of its one GPU (0.5, 0.25, 0.125); absent for whole GPUs */
  share?: number | null;
  /** a share's first eighth of the GPU (0-7): which eighths it holds; kept across server restarts */
  share_slot?: number | null;
  /** a share under MIG: the MIG device it was given (MIG-...) */
  mig_device?: string | null;
}

export interface IHistoryEntry {
  /** this state change's sequence number on the events websocket (GET events?since=) */
  seq: number;
  state: JobState;
  at: string;
  reason: string;
}

export interface IRate {
  /** steps / seconds between consecutive readings of one attempt */
  steps_per_s?: number | null;
  seconds: number;
}

/** What the job reported with ``hive_lab.progress(steps)`` (docs/checkpoint.md). */
export interface IProgress {
  /** the last reported total */
  steps?: number | null;
  /** when it was measured (seconds since the epoch) */
  at?: number | null;
  gpu_type?: string | null;
  /** learned online, per GPU type */
  rates?: { [key: string]: IRate };
  /** steps/s per GPU type from the throughput file (the job's job_type at its GPU count) */
  known_rates?: { [key: string]: number } | null;
  /** the job's declared total (hive_lab.progress(steps, total=)) */
  total_steps?: number | null;
  /** total_steps - steps, when the total is known */
  remaining_steps?: number | null;
  /** when it should finish at its current rate (seconds since the epoch); null while unknown */
  estimated_finish?: number | null;
}

/** A job; ``spec``, ``working_dir`` and ``output_dir`` only for its owner and admins, ``history`` only in ``GET jobs/{id}``. */
export interface IJob {
  id: string;
  name: string;
  user: string;
  vc: string;
  kind: 'batch' | 'kernel';
  state: JobState;
  reason: string;
  /** queued: when the core's forward simulation expects it to start (null: unknown) */
  estimated_start?: string | null;
  /** queued: one line saying what the estimate rests on */
  estimated_start_basis?: string | null;
  /** 0..1000, or -1 = opportunistic */
  priority: number;
  opportunistic: boolean;
  /** GPUs per job; a share of one GPU is 0.5, 0.25 or 0.125 */
  gpus: number;
  gpu_type?: string | null;
  /** task names, e.g. main-0 */
  tasks: string[];
  submitted_at: string;
  started_at?: string | null;
  finished_at?: string | null;
  exit_code?: number | null;
  retries: number;
  max_retries: number;
  placement: IPlacement[];
  /** the validated spec (owner/admin only) */
  spec?: { [key: string]: unknown } | null;
  /** owner/admin only */
  working_dir?: string | null;
  /** owner/admin only */
  output_dir?: string | null;
  /** only in GET jobs/{id} */
  history?: IHistoryEntry[] | null;
  /** run time limit of each attempt in seconds (the spec's, else the VC's default for batch jobs); null: none */
  time_limit_s?: number | null;
  /** running with a limit: when the limit is reached */
  deadline?: string | null;
  /** running with a limit: seconds until the deadline */
  time_left_s?: number | null;
  /** reported progress and rates (when it reports any) */
  progress?: IProgress | null;
  /** an element of this job array (absent otherwise) */
  array_id?: string | null;
  /** its index in the array (HIVE_ARRAY_INDEX) */
  array_index?: number | null;
}

/** ``POST jobs?dry_run=true``: what would happen to this job if it were submitted now. Nothing was stored, launched, published or preempted. */
export interface IWhatIf {
  dry_run?: true;
  /** start: at once on `placement`; preempt: after the jobs in `preempts` stop (on `placement` when known); wait: queued for `reason` */
  outcome: 'start' | 'preempt' | 'wait';
  vc: string;
  gpus: number;
  /** the node and GPU indices of each task (start, and preempt of opportunistic work); empty otherwise */
  placement: IPlacement[];
  /** jobs that would be preempted for it (none are, by this request) */
  preempts: string[];
  /** why it would wait (the sentence a queued job shows), or what the preemption would do */
  reason?: string | null;
  opportunistic: boolean;
  /** the limit it would get (its own or the VC's default) */
  time_limit_s?: number | null;
  /** when it would start: now for `start`; otherwise an estimate where the service makes one, else null */
  estimated_start?: string | null;
}

export interface IJobList {
  jobs: IJob[];
  total: number;
  limit: number;
  offset: number;
  /** the cursor of the next page: send it as after=<next> (null: this is the last page); pages by cursor stay put while new ones arrive, pages by offset shift */
  next?: number | null;
}

/** One element of an array: ``pending`` until released as a job (then ``job_id`` and the job's state). */
export interface IArrayElement {
  index: number;
  /** its job, once released (null while pending) */
  job_id?: string | null;
  state: JobState | 'pending';
  reason: string;
  exit_code?: number | null;
  retries: number;
  started_at?: string | null;
  finished_at?: string | null;
  /** a sweep's parameters of this element */
  params?: { [key: string]: unknown } | null;
}

/** A job array or sweep: its elements counted by state; a page of them in ``GET arrays/{id}``. */
export interface IArray {
  id: string;
  name: string;
  user: string;
  vc: string;
  /** waiting, running (an element runs), held (paused) or ended (every element ended) */
  state: 'waiting' | 'running' | 'held' | 'ended';
  /** why no element is released now (e.g. the owner's max_queued_jobs), or '' */
  reason: string;
  /** elements in all */
  count: number;
  /** at most this many elements not ended at once (null: no throttle) */
  throttle: number | null;
  held: boolean;
  /** the indices, compact (e.g. 0-49 or 1,3,5-9) */
  indices: string;
  /** a sweep's parameter lists */
  sweep?: { [key: string]: unknown[] } | null;
  /** elements by state: pending (not released yet) and the job states */
  counts: { [key: string]: number };
  submitted_at: string;
  /** only in GET arrays/{id}: a page, by index */
  elements?: IArrayElement[] | null;
  limit?: number | null;
  offset?: number | null;
}

export interface IArrayList {
  arrays: IArray[];
  total: number;
  limit: number;
  offset: number;
  /** the cursor of the next page: send it as after=<next> (null: this is the last page); pages by cursor stay put while new ones arrive, pages by offset shift */
  next?: number | null;
}

export interface ILogChunk {
  task: string;
  tasks: string[];
  offset: number;
  next_offset: number;
  data: string;
  eof: boolean;
}

export interface IOutputFile {
  path: string;
  size: number;
}

export interface IOutputList {
  files: IOutputFile[];
}

export interface IGpuShare {
  job: string;
  user?: string | null;
  /** its first eighth of the GPU */
  slot: number;
  /** 0.5, 0.25 or 0.125 of the GPU */
  share: number;
  /** SM utilisation of its own processes, percent of the GPU (NVML per-process utilisation; null where unknown) */
  utilization?: number | null;
}

export interface IGpu {
  node: string;
  index: number;
  uuid?: string | null;
  type?: string | null;
  state?: string | null;
  vc?: string | null;
  job?: string | null;
  user?: string | null;
  opportunistic?: boolean;
  utilization?: number | null;
  memory_used_mb?: number | null;
  memory_total_mb?: number | null;
  temperature_c?: number | null;
  power_w?: number | null;
  bad?: boolean;
  bad_reason?: string | null;
  drained?: boolean;
  path: (string | null)[];
  /** a shared GPU: its shares and who holds each */
  shares?: IGpuShare[] | null;
  /** a shared GPU: the part of it no share holds */
  free_share?: number | null;
}

export interface INode {
  name: string;
  cpus?: number | null;
  memory_mb?: number | null;
  gpu_count?: number | null;
  gpu_types?: string[];
  drained?: boolean;
}

export interface ILauncherInfo {
  /** the launcher in effect: local, docker, slurm or a module path */
  name: string;
  /** "auto" when HiveLabApp.launcher is auto */
  chosen_by: 'auto' | 'config';
}

export interface IHardwareInfo {
  /** the cluster model: HiveLabApp.cluster_config, this machine's GPUs (NVML), or the built-in default */
  source: 'config' | 'nvml' | 'default';
  /** NVIDIA GPUs NVML sees on the server's machine */
  gpus_seen_here: number;
  /** jobs run on this machine, which has no GPU: the GPUs are only modelled (CUDA_VISIBLE_DEVICES is set, but there is no device behind it) */
  simulated: boolean;
}

export interface ICluster {
  gpus_total: number;
  gpus_free: number;
  nodes: INode[];
  /** the core's cell tree (docs/core-api.md: cluster_view) */
  cells: { [key: string]: unknown }[];
  gpus: IGpu[];
  launcher?: ILauncherInfo | null;
  hardware?: IHardwareInfo | null;
}

export interface IVc {
  name: string;
  guaranteed_gpus: number;
  used_gpus: number;
  opportunistic_gpus?: number | null;
  doomed_gpus?: number | null;
  queue_length: number;
  running_jobs?: number | null;
  guaranteed_cells?: { [key: string]: number } | null;
  /** the caller may submit to it */
  mine: boolean;
}

export interface IVcList {
  vcs: IVc[];
}

/** Per-user limits in one VC; a missing key or null = no limit (docs/rest-api.md: Limits). */
export interface ILimits {
  /** GPUs held at once by the user's started jobs */
  max_gpus?: number | null;
  /** the user's started jobs at once */
  max_running_jobs?: number | null;
  /** the user's notebook kernels holding GPUs at once */
  max_kernels?: number | null;
  /** the user's waiting jobs at once (more: 429 at submit) */
  max_queued_jobs?: number | null;
  /** highest priority a job may ask for (above: 403 at submit) */
  max_priority?: number | null;
  /** longest time_limit_s a job may ask for (above: 403) */
  max_time_limit_s?: number | null;
}

export interface IVcLimits {
  vc: string;
  default: { [key: string]: number };
  groups: { [key: string]: { [key: string]: number } };
  users: { [key: string]: { [key: string]: number } };
  /** store: set with PUT (replaces the config's); config: HiveLabApp.user_limits; none: no limits */
  source: 'store' | 'config' | 'none';
}

export interface IMe {
  user: string;
  admin: boolean;
  /** the VCs the caller may submit to */
  vcs: string[];
  groups: string[];
  /** VC -> the caller's limits in effect there (only the keys that are set) */
  limits?: { [key: string]: { [key: string]: number } } | null;
  /** the server serves several people (JupyterHub, a token map), not only its owner */
  shared?: boolean;
}

export interface IDrain {
  node: string;
  gpu?: number | null;
  drained: boolean;
}

export interface IHealthy {
  node: string;
  gpu?: number | null;
  healthy: boolean;
  gpus: number[];
}

/** Totals of one user, VC or day (the key named by ``by``) over the window. */
export interface IUsageRow {
  /** by=user */
  user?: string | null;
  /** by=vc */
  vc?: string | null;
  /** by=day: the UTC date, e.g. 2026-11-23 */
  day?: string | null;
  /** by=job: the job id (all its attempts) */
  job?: string | null;
  /** GPUs x share x seconds held inside the window (running jobs up to now) */
  gpu_seconds: number;
  /** the same per GPU type */
  gpu_seconds_by_type: { [key: string]: number };
  /** CPU time of the attempts that ended in the window, where the launcher measures it (local launcher with cgroups); else null */
  cpu_seconds: number | null;
  /** largest peak memory of one task of those attempts, where measured; else null */
  peak_memory_mb: number | null;
  /** jobs that held GPUs or ended in the window */
  jobs: number;
}

export interface IUsageReport {
  by: 'user' | 'vc' | 'day' | 'job';
  since: string;
  until: string;
  /** sorted by key; non-admins get their own rows only */
  rows: IUsageRow[];
}

/** The store's jobs in a window as a history trace (``hive_scheduler.sim.history``), with the live cluster and policy to replay them on. */
export interface IHistoryReport {
  since: string;
  until: string;
  /** the history CSV's columns, in order */
  columns: string[];
  /** one row per job, keyed by the columns (null: empty) */
  jobs: { [key: string]: unknown }[];
  /** the live cluster model in HiveD's form (loadable as --cluster) */
  cluster: { [key: string]: unknown };
  /** the live order inside VCs, overflow and queueing (skip/backfill) */
  policy: { [key: string]: unknown };
  /** owners are user-001, ... (real_names=true: their names) */
  pseudonymised: boolean;
}

/** First message on every connect: who you are and the newest seq now. */
export interface IEventHello {
  type: 'hello';
  user: string;
  /** the newest stored state change this message follows (its own, for a state message); resume with GET events?since=<the last seq you read> */
  seq: number;
}

/** One stored state change of a job (a row of its history), sent live and replayed after ``since``. */
export interface IEventState {
  type: 'state';
  /** this state change's sequence number: grows, also across restarts, never reused */
  seq: number;
  /** the job's id */
  job: string;
  state: JobState;
  at: string;
  reason: string;
}

/** The server cannot replay what you missed (too many events, or a seq it does not know): refetch what you show (GET jobs, cluster, vcs), then go on from this message's seq. */
export interface IEventSnapshot {
  type: 'snapshot';
  /** the newest stored state change this message follows (its own, for a state message); resume with GET events?since=<the last seq you read> */
  seq: number;
  reason: string;
}

/** A job changed (live only, not replayed): its list view (no spec, no history). */
export interface IEventJob {
  type: 'job';
  /** the newest stored state change this message follows (its own, for a state message); resume with GET events?since=<the last seq you read> */
  seq: number;
  job: IJob;
}

/** Free and total GPUs changed (live only). */
export interface IEventCluster {
  type: 'cluster';
  /** the newest stored state change this message follows (its own, for a state message); resume with GET events?since=<the last seq you read> */
  seq: number;
  gpus_free: number;
  gpus_total: number;
}

/** VC usage may have changed: refetch GET vcs (live only). */
export interface IEventVcs {
  type: 'vcs';
  /** the newest stored state change this message follows (its own, for a state message); resume with GET events?since=<the last seq you read> */
  seq: number;
}

/** Queued jobs' estimated starts changed (to the minute, or their basis): refetch GET jobs (live only). */
export interface IEventEstimates {
  type: 'estimates';
  /** the newest stored state change this message follows (its own, for a state message); resume with GET events?since=<the last seq you read> */
  seq: number;
  /** the queued jobs whose estimate changed */
  jobs: string[];
}
