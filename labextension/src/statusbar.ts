/**
 * Status bar item: "GPUs free/total" and the caller's queued jobs; clicking opens the panel.
 */
import { Widget } from '@lumino/widgets';

import { ClusterModel } from './model';

export class ClusterStatus extends Widget {
  constructor(
    readonly model: ClusterModel,
    onClick: () => void
  ) {
    super();
    this.addClass('jp-HiveStatus');
    this.node.title = 'hive-lab: free GPUs and your queued jobs (click to open the GPU cluster panel)';
    this.node.setAttribute('role', 'button');
    this.node.addEventListener('click', onClick);
    this._free = document.createElement('span');
    this._free.className = 'jp-HiveStatus-free';
    this._queued = document.createElement('span');
    this._queued.className = 'jp-HiveStatus-queued';
    this.node.append(this._free, this._queued);
    model.changed.connect(this.render, this);
    this.render();
  }

  render(): void {
    const m = this.model;
    const known = m.gpusTotal !== null;
    this._free.textContent = known ? `GPUs ${m.gpusFree}/${m.gpusTotal} free` : 'GPUs …';
    this._free.dataset.free = known ? String(m.gpusFree) : '';
    this._free.dataset.total = known ? String(m.gpusTotal) : '';
    const queued = m.myQueued;
    this._queued.textContent = ` · ${queued} queued`;
    this._queued.dataset.queued = String(queued);
  }

  dispose(): void {
    this.model.changed.disconnect(this.render, this);
    super.dispose();
  }

  private _free: HTMLSpanElement;
  private _queued: HTMLSpanElement;
}
