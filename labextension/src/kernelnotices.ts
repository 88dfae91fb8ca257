/**
 * Tells the person what happens to their notebook's GPU kernels, where they look: a Lab
 * notification while a kernel waits for GPUs (the reason, the estimated start when the server
 * gives one), dismissed when it gets them; and one when a kernel is shut down for idling or
 * preempted (the notebook itself only shows "No Kernel" / "Dead"), with a button that shows the
 * notebook when it is open in this page. The job's state comes over the events websocket.
 */
import { Notification } from '@jupyterlab/apputils';

import { IJob } from './api';
import { capitalized, estimateText } from './format';
import { PLACED_STATES, WAITING_STATES } from './jobStates';
import { ClusterModel } from './model';
import { notify, notifyUpdate } from './notify';

const STOPPED = /idle kernel culled|preempt/i;

/** The notebook a kernel job belongs to (its name is "kernel: <notebook file>"). */
export function kernelLabel(job: IJob): string {
  return job.name.replace(/^kernel: /, '');
}

/**
 * What to say about a kernel job now, or null (pure, for tests and for the class below).
 * `previous`: the state this page last saw (undefined: never seen); `fresh`: the job appeared
 * after the page had loaded its lists (so a kernel that ended before the page opened is not news).
 */
export function kernelNotice(
  job: IJob & { estimated_start?: string | null },
  previous: string | undefined,
  fresh = false
): { kind: 'waiting' | 'started' | 'ended'; type: Notification.TypeOptions; message: string } | null {
  const label = kernelLabel(job);
  const wasRunning = previous !== undefined && PLACED_STATES.has(previous);
  if (WAITING_STATES.has(job.state) && wasRunning && STOPPED.test(job.reason ?? '')) {
    // preempted and requeued: the kernel died, another starts when GPUs free up
    return {
      kind: 'waiting',
      type: 'warning',
      message: `The kernel of ${label} was stopped: ${job.reason}. It waits for GPUs again (job ${job.id}); variables are lost.`
    };
  }
  if (WAITING_STATES.has(job.state)) {
    const estimate = estimateText(job, Date.now());  // the panel's and the cell's words
    const eta = !estimate ? '' : estimate.startsWith('starts') ? ` It ${estimate}.` : ` ${capitalized(estimate)}.`;
    return {
      kind: 'waiting',
      type: 'info',
      message: `The kernel of ${label} waits for GPUs (job ${job.id}): ${job.reason ?? 'queued'}.${eta}`
    };
  }
  if (PLACED_STATES.has(job.state) && previous !== undefined && WAITING_STATES.has(previous)) {
    return { kind: 'started', type: 'success', message: `The kernel of ${label} got its GPUs and starts.` };
  }
  const reason = job.reason ?? '';
  if (
    (job.state === 'cancelled' || job.state === 'failed') &&
    (wasRunning || (previous === undefined && fresh)) &&
    STOPPED.test(reason)
  ) {
    return { kind: 'ended', type: 'warning', message: `The kernel of ${label} was stopped: ${reason}` };
  }
  return null;
}

export class KernelNotices {
  /** `showNotebook(label)`: a callback that shows that notebook when it is open here, else null. */
  constructor(
    private model: ClusterModel,
    private showNotebook: (label: string) => (() => void) | null = () => null
  ) {
    model.changed.connect(this._update, this);
  }

  dispose(): void {
    this.model.changed.disconnect(this._update, this);
  }

  private _update(): void {
    if (!this.model.loaded) {
      return;
    }
    const first = !this._baseline;
    this._baseline = true;
    for (const job of this.model.myJobs) {
      if (job.kind !== 'kernel') {
        continue;
      }
      const previous = this._states.get(job.id);
      const fresh = !first && previous === undefined;
      const key = `${job.state}|${job.reason ?? ''}|${(job as any).estimated_start ?? ''}`;
      if (this._keys.get(job.id) === key) {
        continue;
      }
      this._keys.set(job.id, key);
      this._states.set(job.id, job.state);
      const notice = kernelNotice(job, previous, fresh);
      const waitingId = this._waiting.get(job.id);
      if (notice?.kind === 'waiting') {
        if (waitingId && notifyUpdate(waitingId, notice.message, notice.type, {
          autoClose: false,
          actions: this._actions(job, notice.type === 'warning')
        })) {
          continue;
        }
        this._waiting.set(
          job.id,
          notify(notice.message, notice.type, {
            autoClose: false,
            actions: this._actions(job, notice.type === 'warning')
          })
        );
        continue;
      }
      if (waitingId) {
        Notification.dismiss(waitingId);
        this._waiting.delete(job.id);
      }
      if (notice) {
        notify(notice.message, notice.type, {
          autoClose: notice.kind === 'started' ? 5000 : false,
          actions: this._actions(job, notice.kind === 'ended')
        });
      }
    }
  }

  /** "Show notebook" on a stop notice, when that notebook is open in this page. */
  private _actions(job: IJob, stopped: boolean): Notification.IAction[] {
    const show = stopped ? this.showNotebook(kernelLabel(job)) : null;
    return show ? [{ label: 'Show notebook', caption: `Go to ${kernelLabel(job)}`, callback: show }] : [];
  }

  private _states = new Map<string, string>();
  private _keys = new Map<string, string>();
  private _waiting = new Map<string, string>();
  private _baseline = false;
}
