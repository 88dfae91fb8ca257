/**
 * A notification when one of my batch jobs ends (issue 30): its result in words and a button that
 * opens its log. Only jobs this page saw waiting or running are announced (not every old job at load);
 * GPU kernels have their own notices (kernelnotices.ts), and a notebook submitted from the palette
 * its own toast (submit.ts adds it to `announcedElsewhere`).
 */
import { ACTIVE_STATES, IJob } from './api';
import { FINAL_STATES } from './jobStates';
import { ClusterModel } from './model';
import { announceArrayEnds } from './arraynotices';
import { duration } from './format';
import { notify } from './notify';

export const announcedElsewhere = new Set<string>();

/** `train (j-000012) succeeded after 2 min 05 s` / `train (j-000012) failed: task main-0 exited with code 1`. */
export function endedText(job: IJob): string {
  const name = `${job.name || job.id} (${job.id})`;
  const ran =
    job.started_at && job.finished_at
      ? ` after ${duration(Math.max(0, (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000))}`
      : '';
  if (job.state === 'succeeded') {
    return `${name} succeeded${ran}`;
  }
  return `${name} ${job.state}${ran}${job.reason ? `: ${job.reason}` : ''}`;
}

export function announceJobEnds(model: ClusterModel, showLog: (job: IJob) => void): void {
  announceArrayEnds(model); // an array's succeeded elements are announced as one, when it ends
  const watching = new Set<string>();
  const mine = (job: IJob) => !!model.me && job.user === model.me.user && job.kind !== 'kernel';
  model.changed.connect(() => {
    for (const job of model.myJobs) {
      if (ACTIVE_STATES.has(job.state) && mine(job)) {
        watching.add(job.id);
      }
    }
  });
  model.jobEvent.connect((_, job) => {
    if (!mine(job)) {
      return;
    }
    if (ACTIVE_STATES.has(job.state)) {
      watching.add(job.id);
      return;
    }
    if (!FINAL_STATES.has(job.state) || !watching.delete(job.id) || announcedElsewhere.has(job.id)) {
      return;
    }
    if (job.array_id && job.state === 'succeeded') {
      return; // announced with its array (arraynotices.ts)
    }

    const ok = job.state === 'succeeded';
    notify(endedText(job), ok ? 'success' : job.state === 'cancelled' ? 'info' : 'error', {
      autoClose: ok ? 8000 : false,
      actions: [{ label: 'Show log', caption: `Show the log of ${job.id}`, callback: () => showLog(job) }]
    });
  });
}
