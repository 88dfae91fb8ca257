// Generated from hive_lab_server/wire/states.py by
//   python -m hive_lab_server.wire.job_state labextension/src/jobStates.ts
// Do not edit: tests/server/wire/test_job_state_ts.py fails when this file and the Python drift.

export type JobState =
  | 'submitted'
  | 'queued'
  | 'scheduled'
  | 'running'
  | 'paused'
  | 'succeeded'
  | 'failed'
  | 'cancelled';

export const JOB_STATES: readonly JobState[] = ['submitted', 'queued', 'scheduled', 'running', 'paused', 'succeeded', 'failed', 'cancelled'];

/** Not finished (the job may still hold or wait for GPUs). */
export const ACTIVE_STATES: ReadonlySet<string> = new Set<JobState>(['submitted', 'queued', 'scheduled', 'running', 'paused']);

/** Finished: nothing changes any more. */
export const FINAL_STATES: ReadonlySet<string> = new Set<JobState>(['succeeded', 'failed', 'cancelled']);

/** Waits for GPUs: nothing placed yet. */
export const WAITING_STATES: ReadonlySet<string> = new Set<JobState>(['submitted', 'queued']);

/** Its tasks do not run yet (a wait reason, an estimated start). */
export const PENDING_STATES: ReadonlySet<string> = new Set<JobState>(['submitted', 'queued', 'scheduled']);

/** Holds GPUs. */
export const PLACED_STATES: ReadonlySet<string> = new Set<JobState>(['scheduled', 'running']);
