/**
 * Main-area topology heatmap: one canvas cell per GPU, grouped by rack / node / switch,
 * coloured by VC, job, user or state, with hover details. Drawing is a single pass of
 * fillRect calls, so thousands of GPUs render in a few milliseconds.
 */
import { gpuName } from './format';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { IGpu } from './api';
import { colorFor, colorForName, colorKey, gpuState, NONE_COLOR } from './colors';
import { GpuCharts } from './gpucharts';
import { ClusterModel, ColorMode, IHiveSettings } from './model';
import { hitTest, IHeatmapLayout, layoutHeatmap, NODE_LABEL } from './layout';

const MODES: { value: ColorMode; label: string }[] = [
  { value: 'vc', label: 'Virtual cluster' },
  { value: 'job', label: 'Job' },
  { value: 'user', label: 'User' },
  { value: 'state', label: 'State' }
];

export class HeatmapWidget extends Widget {
  constructor(readonly model: ClusterModel) {
    super();
    this.id = 'hive-lab-heatmap';
    this.title.label = 'GPU heatmap';
    this.title.caption = 'hive-lab: GPU topology heatmap';
    this.title.closable = true;
    this.addClass('jp-HiveHeatmap');

    const toolbar = document.createElement('div');
    toolbar.className = 'jp-HiveHeatmap-toolbar';
    const label = document.createElement('label');
    label.textContent = 'Colour by ';
    this._select = document.createElement('select');
    this._select.className = 'jp-HiveHeatmap-mode';
    for (const mode of MODES) {
      const option = document.createElement('option');
      option.value = mode.value;
      option.textContent = mode.label;
      this._select.appendChild(option);
    }
    this._select.value = model.settings.colorMode;
    this._select.onchange = () => {
      this._mode = this._select.value as ColorMode;
      this.render();
    };
    label.appendChild(this._select);
    this._summary = document.createElement('span');
    this._summary.className = 'jp-HiveHeatmap-summary';
    toolbar.append(label, this._summary);

    this._legend = document.createElement('div');
    this._legend.className = 'jp-HiveHeatmap-legend';

    this._scroller = document.createElement('div');
    this._scroller.className = 'jp-HiveHeatmap-scroller';
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'jp-HiveHeatmap-canvas';
    this.canvas.setAttribute('role', 'img');
    this._tooltip = document.createElement('div');
    this._tooltip.className = 'jp-HiveHeatmap-tooltip';
    this._tooltip.hidden = true;
    this._scroller.append(this.canvas, this._tooltip);
    this._charts = new GpuCharts(model);
    // the heatmap takes the height it needs (no empty pane for a 4-GPU machine); the charts follow
    this.node.append(toolbar, this._legend, this._scroller, this._charts.node);

    this.canvas.addEventListener('mousemove', this._onMove);
    this.canvas.addEventListener('mouseleave', () => (this._tooltip.hidden = true));

    this._mode = model.settings.colorMode;
    this._settingsMode = model.settings.colorMode;
    (this.canvas as any).hiveCells = () => this.cells();
    (this.canvas as any).hiveNodes = () =>
      (this._cellLayout?.nodes ?? []).map(n => ({ ...n, labelled: !!this._cellLayout?.nodeLabels }));
    model.clusterChanged.connect(this._onClusterChanged, this);
    model.settingsChanged.connect(this._onSettingsChanged, this);
    model.changed.connect(this._onModelChanged, this);
    model.watchCluster(true);
    model.watchSamples(true);
  }

  readonly canvas: HTMLCanvasElement;

  /** The current layout (cell rectangles in CSS pixels). */
  get cellLayout(): IHeatmapLayout | null {
    return this._cellLayout;
  }

  /**
   * Every painted cell with its GPU and colour, in CSS pixels of the canvas. Also reachable
   * as `canvas.hiveCells()` so tools and browser tests can check pixels against GPUs.
   */
  cells(): { node: string; index: number; x: number; y: number; w: number; h: number; color: string }[] {
    const gpus = this.model.cluster?.gpus ?? [];
    const jobVcs = this._jobVcs();
    return (this._cellLayout?.cells ?? []).map(c => ({
      node: gpus[c.gpu].node,
      index: gpus[c.gpu].index,
      x: c.x,
      y: c.y,
      w: c.w,
      h: c.h,
      color: colorFor(colorKey(gpus[c.gpu], this._mode, jobVcs), this._mode)
    }));
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.watchCluster(false);
    this.model.watchSamples(false);
    this.model.changed.disconnect(this._onModelChanged, this);
    this.model.clusterChanged.disconnect(this._onClusterChanged, this);
    this.model.settingsChanged.disconnect(this._onSettingsChanged, this);
    super.dispose();
  }

  /** Lays out (when the GPU list or width changed) and paints every cell. */
  render(): void {
    const cluster = this.model.cluster;
    if (!cluster || !this.isVisible) {
      return;
    }
    performance.mark('hive-heatmap:render-start');
    const gpus = cluster.gpus;
    const width = Math.max(this._scroller.clientWidth, 200);
    const relayout =
      !this._cellLayout || this._layoutGpus !== gpus || this._layoutWidth !== width;
    if (relayout) {
      this._cellLayout = layoutHeatmap(gpus, width);
      this._layoutGpus = gpus;
      this._layoutWidth = width;
    }
    const layout = this._cellLayout!;
    const ratio = window.devicePixelRatio || 1;
    const canvas = this.canvas;
    const pixelW = Math.round(layout.width * ratio);
    const pixelH = Math.round(layout.height * ratio);
    if (canvas.width !== pixelW || canvas.height !== pixelH) {
      canvas.width = pixelW;
      canvas.height = pixelH;
      canvas.style.width = `${layout.width}px`;
      canvas.style.height = `${layout.height}px`;
    }
    const ctx = canvas.getContext('2d')!;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, layout.width, layout.height);

    const css = getComputedStyle(this.node);
    const fg = css.getPropertyValue('--jp-ui-font-color1').trim() || '#333';
    const fg2 = css.getPropertyValue('--jp-ui-font-color2').trim() || '#666';
    const nodeFill = css.getPropertyValue('--jp-layout-color2').trim() || '#eee';
    const border = css.getPropertyValue('--jp-border-color1').trim() || '#bbb';
    const font = css.getPropertyValue('--jp-ui-font-family').trim() || 'sans-serif';

    ctx.font = `600 11px ${font}`;
    ctx.textBaseline = 'top';
    ctx.fillStyle = fg;
    for (const group of layout.groups) {
      ctx.fillText(group.label, group.x, group.y + 2);
    }
    ctx.fillStyle = nodeFill;
    ctx.strokeStyle = border;
    ctx.lineWidth = 1;
    for (const node of layout.nodes) {
      ctx.fillRect(node.x, node.y, node.w, node.h);
      ctx.strokeRect(node.x + 0.5, node.y + 0.5, node.w - 1, node.h - 1);
    }
    if (layout.nodeLabels) {
      // each node's name above its box, cut to the box (and the gap after it)
      ctx.font = `10px ${font}`;
      ctx.fillStyle = fg2;
      for (const node of layout.nodes) {
        ctx.fillText(fitText(ctx, node.label, node.w + 4), node.x, node.y - NODE_LABEL + 2);
      }
    }

    // Paint cells batched by colour: few fillStyle changes however many GPUs.
    const mode = this._mode;
    const batches = new Map<string, number[]>();
    const counts = new Map<string, number>();
    const faded: number[] = [];
    const bad: number[] = [];
    const borrowed: number[] = [];
    const jobVcs = this._jobVcs();
    layout.cells.forEach((cell, i) => {
      const gpu = gpus[cell.gpu];
      const key = colorKey(gpu, mode, jobVcs);
      const color = colorFor(key, mode);
      const label = key ?? 'none';
      counts.set(label, (counts.get(label) ?? 0) + 1);
      let batch = batches.get(color);
      if (!batch) {
        batch = [];
        batches.set(color, batch);
      }
      batch.push(i);
      if (mode === 'vc' && key !== null && gpuState(gpu) === 'free') {
        faded.push(i);
      }
      if (mode !== 'state' && (gpu.bad || gpu.drained)) {
        bad.push(i);
      }
      if (mode !== 'state' && gpu.opportunistic && gpu.job) {
        borrowed.push(i);
      }
    });
    for (const [color, indices] of batches) {
      ctx.fillStyle = color;
      for (const i of indices) {
        const c = layout.cells[i];
        ctx.fillRect(c.x, c.y, c.w, c.h);
      }
    }
    // A VC's bound but idle GPUs: the VC colour, washed out.
    ctx.fillStyle = 'rgba(255, 255, 255, 0.55)';
    for (const i of faded) {
      const c = layout.cells[i];
      ctx.fillRect(c.x + 2, c.y + 2, c.w - 4, c.h - 4);
    }
    // Opportunistic GPUs: a white dot in the middle.
    ctx.fillStyle = '#ffffff';
    for (const i of borrowed) {
      const c = layout.cells[i];
      const d = Math.max(2, Math.round(c.w / 4));
      ctx.fillRect(c.x + (c.w - d) / 2, c.y + (c.h - d) / 2, d, d);
    }
    // A shared GPU: drawn as its shares (eighths left to right), each in its holder's colour
    // (its job's or user's in those modes), free eighths left blank, a thin line between shares.
    layout.cells.forEach(c => {
      const gpu = gpus[c.gpu];
      if (!gpu.shares || !gpu.shares.length) {
        return;
      }
      const eighth = (c.w - 2) / 8;
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(c.x + 1, c.y + 1, c.w - 2, c.h - 2);
      for (const s of gpu.shares) {
        const name = mode === 'user' ? s.user ?? s.job : s.job;
        ctx.fillStyle =
          mode === 'job' || mode === 'user' ? colorForName(name) : colorFor(colorKey(gpu, mode, jobVcs), mode);
        ctx.fillRect(c.x + 1 + s.slot * eighth, c.y + 1, s.share * 8 * eighth - 1, c.h - 2);
      }
    });
    // Bad or drained hardware in the VC/job/user modes: a cross over the cell.
    ctx.strokeStyle = '#000';
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    for (const i of bad) {
      const c = layout.cells[i];
      ctx.moveTo(c.x + 2, c.y + 2);
      ctx.lineTo(c.x + c.w - 2, c.y + c.h - 2);
      ctx.moveTo(c.x + c.w - 2, c.y + 2);
      ctx.lineTo(c.x + 2, c.y + c.h - 2);
    }
    ctx.stroke();
    this._hovered = -1;

    performance.mark('hive-heatmap:render-end', {
      detail: { width: layout.width, cells: layout.cells.length, relayout }
    });
    const measure = performance.measure(
      'hive-heatmap:render',
      'hive-heatmap:render-start',
      'hive-heatmap:render-end'
    );
    this._renders += 1;
    canvas.dataset.gpus = String(gpus.length);
    canvas.dataset.cells = String(layout.cells.length);
    canvas.dataset.renders = String(this._renders);
    canvas.dataset.renderMs = measure ? measure.duration.toFixed(2) : '';
    canvas.dataset.mode = mode;
    canvas.setAttribute(
      'aria-label',
      `GPU heatmap: ${gpus.length} GPUs, ${cluster.gpus_free} free`
    );
    this._summary.textContent = `${cluster.gpus_free} of ${cluster.gpus_total} GPUs free · ${layout.nodes.length} node${layout.nodes.length === 1 ? "" : "s"}`;
    this._renderLegend(counts, mode, fg2);
    this._charts.render();
  }

  /** The CSS colour a GPU is painted with in the current mode (tests compare pixels with it). */
  colorOf(gpu: IGpu): string {
    return colorFor(colorKey(gpu, this._mode, this._jobVcs()), this._mode);
  }

  private _jobVcs(): Map<string, string> {
    const map = new Map<string, string>();
    for (const job of this.model.allJobs) {
      map.set(job.id, job.vc);
    }
    return map;
  }

  protected onAfterShow(msg: Message): void {
    this.render();
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    this.render();
  }

  private _onClusterChanged(): void {
    this.render();
  }

  private _onModelChanged(): void {
    if (this.isVisible) {
      this._charts.render(); // who "me" is arrives with the first refresh
    }
  }

  private _onSettingsChanged(_: ClusterModel, settings: IHiveSettings): void {
    if (settings.colorMode !== this._settingsMode) {
      this._settingsMode = settings.colorMode;
      this._mode = settings.colorMode;
      this._select.value = settings.colorMode;
      this.render();
    }
  }

  private _renderLegend(counts: Map<string, number>, mode: ColorMode, fg: string): void {
    const entries = [...counts.entries()].sort((a, b) =>
      a[0] === 'none' ? 1 : b[0] === 'none' ? -1 : a[0].localeCompare(b[0])
    );
    this._legend.replaceChildren(
      ...entries.slice(0, 40).map(([key, count]) => {
        const item = document.createElement('span');
        item.className = 'jp-HiveHeatmap-legendItem';
        const swatch = document.createElement('span');
        swatch.className = 'jp-HiveHeatmap-swatch';
        swatch.style.background =
          key === 'none' ? NONE_COLOR : colorFor(key, mode);
        item.append(swatch, `${key === 'none' ? 'free' : key} (${count})`);
        item.style.color = fg;
        return item;
      })
    );
  }

  private _onMove = (event: MouseEvent): void => {
    const layout = this._cellLayout;
    const cluster = this.model.cluster;
    if (!layout || !cluster) {
      return;
    }
    const rect = this.canvas.getBoundingClientRect();
    const cell = hitTest(layout, event.clientX - rect.left, event.clientY - rect.top);
    if (!cell) {
      this._tooltip.hidden = true;
      this._hovered = -1;
      return;
    }
    const gpu = cluster.gpus[cell.gpu];
    if (this._hovered !== cell.gpu) {
      this._hovered = cell.gpu;
      this._tooltip.replaceChildren(...tooltipLines(gpu));
    }
    this._tooltip.hidden = false;
    const left = cell.x + cell.w + 8;
    const maxLeft = this._scroller.scrollLeft + this._scroller.clientWidth - 240;
    this._tooltip.style.left = `${Math.max(0, Math.min(left, maxLeft))}px`;
    this._tooltip.style.top = `${cell.y + cell.h + 4}px`;
  };

  private _charts: GpuCharts;
  private _select: HTMLSelectElement;
  private _summary: HTMLSpanElement;
  private _legend: HTMLDivElement;
  private _scroller: HTMLDivElement;
  private _tooltip: HTMLDivElement;
  private _mode: ColorMode;
  private _settingsMode: ColorMode;
  private _cellLayout: IHeatmapLayout | null = null;
  private _layoutGpus: IGpu[] | null = null;
  private _layoutWidth = 0;
  private _hovered = -1;
  private _renders = 0;
}

/** `text`, or as much of it as fits in `width` pixels with an ellipsis. */
function fitText(ctx: CanvasRenderingContext2D, text: string, width: number): string {
  if (ctx.measureText(text).width <= width) {
    return text;
  }
  let n = text.length;
  while (n > 1 && ctx.measureText(text.slice(0, n) + '…').width > width) {
    n--;
  }
  return text.slice(0, n) + '…';
}

function tooltipLines(gpu: IGpu): HTMLElement[] {
  const rows: [string, string][] = [
    ['GPU', `${gpuName(gpu.node, gpu.index)}${gpu.type ? ` (${gpu.type})` : ''}`],
    ['state', gpuState(gpu)],
    ['VC', gpu.vc ?? '—'],
    ['job', gpu.job ?? '—'],
    ['user', gpu.user ?? '—']
  ];
  if (gpu.utilization !== null && gpu.utilization !== undefined) {
    rows.push(['utilization', `${gpu.utilization}%`]);
  }
  if (gpu.memory_used_mb !== null && gpu.memory_used_mb !== undefined) {
    rows.push([
      'memory',
      `${gpu.memory_used_mb}${gpu.memory_total_mb ? ` / ${gpu.memory_total_mb}` : ''} MiB`
    ]);
  }
  if (gpu.uuid) {
    rows.push(['uuid', gpu.uuid]);
  }
  for (const s of gpu.shares ?? []) {
    // Each share's own utilisation (its job's processes' SM use), when the server measured it.
    const util = s.utilization !== null && s.utilization !== undefined ? `, ${s.utilization}% util` : '';
    rows.push([
      `share ${s.slot}/8`,
      `${s.share} GPU: ${s.job}${s.user ? ` (${s.user})` : ''}${util}`
    ]);
  }
  if (gpu.shares && gpu.shares.length) {
    rows.push(['free', `${gpu.free_share ?? 0} GPU`]);
  }
  rows.push(['path', (gpu.path ?? []).join(' / ')]);
  return rows.map(([key, value]) => {
    const line = document.createElement('div');
    line.className = 'jp-HiveHeatmap-tooltipRow';
    line.dataset.key = key;
    const k = document.createElement('b');
    k.textContent = key;
    line.append(k, ` ${value}`);
    return line;
  });
}
