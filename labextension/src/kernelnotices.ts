/**
 * Tells the person what happens to their notebook's GPU kernels, where they look: a Lab
 * notification while a kernel waits for GPUs (the reason, the estimated start when the server
 * gives one), dismissed when it gets them; and one when a kernel is shut down for idling or
 * preempted (the notebook itself only shows "No Kernel" / "Dead").
 */
import { Notification } from '@jupyterlab/apputils';

import { IJob } from './api';
import { ClusterModel } from './model';

const WAITING = new Set(['submitted', 'queued']);
const RUNNING = new Set(['scheduled', 'running']);

/** What to say about a kernel job now, or null (pure, for tests and for the class below). */
export function kernelNotice(
  job: IJob & { estimated_start?: string | null },
  previous: string | undefined
): { kind: 'waiting' | 'started' | 'ended'; type: Notification.TypeOptions; message: string } | null {
  const label = job.name.replace(/^kernel: /, '');
  if (WAITING.has(job.state)) {
    const eta = job.estimated_start
      ? ` Estimated start: ${new Date(job.estimated_start).toLocaleTimeString()}.`
      : '';
    return {
      kind: 'waiting',
      type: 'info',
      message: `The kernel of ${label} waits for GPUs (job ${job.id}): ${job.reason ?? 'queued'}.${eta}`
    };
  }
  if (RUNNING.has(job.state) && previous !== undefined && WAITING.has(previous)) {
    return { kind: 'started', type: 'success', message: `The kernel of ${label} got its GPUs and starts.` };
  }
  const reason = job.reason ?? '';
  if (
    (job.state === 'cancelled' || job.state === 'failed') &&
    previous !== undefined &&
    RUNNING.has(previous) &&
    /idle kernel culled|preempt/i.test(reason)
  ) {
    return { kind: 'ended', type: 'warning', message: `The kernel of ${label} was stopped: ${reason}` };
  }
  return null;
}

export class KernelNotices {
  constructor(private model: ClusterModel) {
    model.changed.connect(this._update, this);
  }

  dispose(): void {
    this.model.changed.disconnect(this._update, this);
  }

  private _update(): void {
    for (const job of this.model.myJobs) {
      if (job.kind !== 'kernel') {
        continue;
      }
      const previous = this._states.get(job.id);
      const key = `${job.state}|${job.reason ?? ''}|${(job as any).estimated_start ?? ''}`;
      if (this._keys.get(job.id) === key) {
        continue;
      }
      this._keys.set(job.id, key);
      this._states.set(job.id, job.state);
      const notice = kernelNotice(job, previous);
      const waitingId = this._waiting.get(job.id);
      if (notice?.kind === 'waiting') {
        if (waitingId && Notification.update({ id: waitingId, message: notice.message, type: 'info' })) {
          continue;
        }
        this._waiting.set(job.id, Notification.emit(notice.message, 'info', { autoClose: false }));
        continue;
      }
      if (waitingId) {
        Notification.dismiss(waitingId);
        this._waiting.delete(job.id);
      }
      if (notice) {
        Notification.emit(notice.message, notice.type, {
          autoClose: notice.kind === 'started' ? 5000 : false
        });
      }
    }
  }

  private _states = new Map<string, string>();
  private _keys = new Map<string, string>();
  private _waiting = new Map<string, string>();
}
