/**
 * "Your GPUs": for every GPU the caller's jobs hold, a small live chart of its utilisation and
 * memory (in the spirit of jupyterlab-nvdashboard), drawn from the readings the model keeps of
 * `GET cluster` (the server's NVML sampler). Shown under the heatmap.
 */
import { gpuName } from './format';
import { IGpu } from './api';
import { ClusterModel, IGpuReading } from './model';
import { el } from './dom';

const CHART_W = 220;
const CHART_H = 56;
const UTIL_COLOR = '#2f80ed';
const MEM_COLOR = '#9b51e0';


/** Points of one series scaled into a w x h box: x by position (newest at the right), y by value / max. */
export function seriesPoints(
  values: (number | null)[],
  max: number,
  w: number,
  h: number,
  slots: number
): ([number, number] | null)[] {
  const step = w / Math.max(1, slots - 1);
  const offset = slots - values.length;
  return values.map((v, i) =>
    v === null || max <= 0 ? null : [(offset + i) * step, h - Math.min(1, Math.max(0, v / max)) * h]
  );
}

export function memoryLine(r: IGpuReading | undefined): string {
  if (!r || r.memoryUsedMb === null) {
    return 'memory —';
  }
  const used = (r.memoryUsedMb / 1024).toFixed(1);
  return r.memoryTotalMb ? `memory ${used} / ${(r.memoryTotalMb / 1024).toFixed(0)} GiB` : `memory ${used} GiB`;
}

export class GpuCharts {
  readonly node = el('div', 'jp-HiveCharts');

  constructor(private readonly model: ClusterModel) {
    this._title = el('h3', 'jp-HiveCharts-title', 'Your GPUs');
    this._grid = el('div', 'jp-HiveCharts-grid');
    this.node.append(this._title, this._grid);
  }

  render(): void {
    const gpus = this.model.myGpus;
    const css = getComputedStyle(this.node);
    const grid = css.getPropertyValue('--jp-border-color2').trim() || '#ddd';
    this._title.textContent = gpus.length
      ? `Your GPUs (${gpus.length}): utilisation and memory, every ${this.model.settings.chartInterval} s`
      : 'Your GPUs';
    if (gpus.length === 0) {
      this._grid.replaceChildren(
        el(
          'div',
          'jp-HiveCharts-empty',
          this.model.me
            ? 'Your jobs hold no GPU now; the GPUs they get show here with their utilisation and memory.'
            : 'connecting…'
        )
      );
      return;
    }
    this._grid.replaceChildren(...gpus.map(gpu => this._card(gpu, grid)));
  }

  private _card(gpu: IGpu, gridColor: string): HTMLElement {
    const readings = this.model.history(gpu.node, gpu.index).filter(r => r.job === gpu.job);
    const last = readings[readings.length - 1];
    const card = el('div', 'jp-HiveCharts-card');
    card.dataset.gpu = `${gpu.node}#${gpu.index}`;
    card.dataset.job = gpu.job ?? '';
    card.dataset.points = String(readings.length);
    card.dataset.utilization = last?.utilization === null || !last ? '' : String(last.utilization);
    card.dataset.memoryUsedMb = last?.memoryUsedMb === null || !last ? '' : String(last.memoryUsedMb);

    const head = el('div', 'jp-HiveCharts-head');
    head.append(
      el('span', 'jp-HiveCharts-gpu', `${gpuName(gpu.node, gpu.index)}${gpu.type ? ` ${gpu.type}` : ''}`),
      el('span', 'jp-HiveCharts-job', gpu.job ?? '')
    );
    const values = el('div', 'jp-HiveCharts-values');
    const util = el(
      'span',
      'jp-HiveCharts-util',
      last?.utilization === null || !last ? 'utilisation —' : `utilisation ${last.utilization}%`
    );
    util.style.color = UTIL_COLOR;
    const mem = el('span', 'jp-HiveCharts-mem', memoryLine(last));
    mem.style.color = MEM_COLOR;
    values.append(util, mem);

    const canvas = el('canvas', 'jp-HiveCharts-canvas');
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(CHART_W * ratio);
    canvas.height = Math.round(CHART_H * ratio);
    canvas.style.width = `${CHART_W}px`;
    canvas.style.height = `${CHART_H}px`;
    canvas.setAttribute(
      'aria-label',
      `${gpu.node} GPU ${gpu.index}: ${util.textContent}, ${mem.textContent}`
    );
    const ctx = canvas.getContext('2d');
    if (ctx) {
      ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
      ctx.strokeStyle = gridColor;
      ctx.lineWidth = 1;
      for (const f of [0, 0.5, 1]) {
        const y = Math.round(f * (CHART_H - 1)) + 0.5;
        ctx.beginPath();
        ctx.moveTo(0, y);
        ctx.lineTo(CHART_W, y);
        ctx.stroke();
      }
      const slots = Math.max(readings.length, 60);
      const memMax =
        last?.memoryTotalMb ?? Math.max(1, ...readings.map(r => r.memoryUsedMb ?? 0));
      this._line(ctx, seriesPoints(readings.map(r => r.memoryUsedMb), memMax, CHART_W, CHART_H - 2, slots), MEM_COLOR);
      this._line(ctx, seriesPoints(readings.map(r => r.utilization), 100, CHART_W, CHART_H - 2, slots), UTIL_COLOR);
    }
    card.append(head, values, canvas);
    return card;
  }

  private _line(ctx: CanvasRenderingContext2D, points: ([number, number] | null)[], color: string): void {
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let pen = false;
    for (const p of points) {
      if (!p) {
        pen = false;
        continue;
      }
      if (pen) {
        ctx.lineTo(p[0], p[1] + 1);
      } else {
        ctx.moveTo(p[0], p[1] + 1);
        pen = true;
      }
    }
    ctx.stroke();
  }

  private _title: HTMLHeadingElement;
  private _grid: HTMLDivElement;
}
