/**
 * Pure layout of the topology heatmap: GPUs grouped by their top-level cell (rack), then by
 * node, then by the cells between node and GPU (socket / switch), as rectangles on a canvas.
 * Kept free of DOM so it is cheap to run for thousands of GPUs.
 */
import { IGpu } from './api';

export interface ICellRect {
  /** Index into the cluster's `gpus` list. */
  gpu: number;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface IBoxRect {
  label: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface IHeatmapLayout {
  width: number;
  height: number;
  cells: ICellRect[];
  /** Node boxes (their `label`: the node's name, drawn above the box when `nodeLabels`). */
  nodes: IBoxRect[];
  groups: IBoxRect[];
  nodeLabels?: boolean;
}

const GAP = 2;
const SUBGROUP_GAP = 3;
const NODE_PAD = 3;
const NODE_GAP = 6;
const GROUP_LABEL = 16;
const GROUP_GAP = 10;
const MARGIN = 8;
/** Room above each node box for its name (up to this many nodes; beyond, names are in the tooltip). */
export const NODE_LABEL = 14;
export const MAX_LABELLED_NODES = 512;

interface INodeGroup {
  name: string;
  gpus: number[];
}

interface ITopGroup {
  name: string;
  nodes: INodeGroup[];
}

/** Groups GPU indices by top cell and node, keeping the server's stable order. */
export function groupGpus(gpus: IGpu[]): ITopGroup[] {
  const tops: ITopGroup[] = [];
  const topIndex = new Map<string, ITopGroup>();
  const nodeIndex = new Map<string, INodeGroup>();
  gpus.forEach((gpu, i) => {
    const path = gpu.path ?? [];
    const nodeAt = path.indexOf(gpu.node);
    const topName = (nodeAt > 0 ? path[0] : null) ?? 'cluster';
    let top = topIndex.get(topName);
    if (!top) {
      top = { name: topName, nodes: [] };
      topIndex.set(topName, top);
      tops.push(top);
    }
    let node = nodeIndex.get(gpu.node);
    if (!node) {
      node = { name: gpu.node, gpus: [] };
      nodeIndex.set(gpu.node, node);
      top.nodes.push(node);
    }
    node.gpus.push(i);
  });
  return tops;
}

/** The cell between node and GPU that a GPU sits in (switch / socket), for sub-group gaps. */
function parentCell(gpu: IGpu): string {
  const path = gpu.path ?? [];
  const nodeAt = path.indexOf(gpu.node);
  return (path.length > nodeAt + 1 ? path[path.length - 1] : null) ?? gpu.node;
}

/** Bigger cells for small clusters (a 4-GPU machine), smaller for thousands of GPUs. */
export function cellSize(count: number): number {
  return count <= 16 ? 30 : count <= 128 ? 18 : count <= 1024 ? 14 : 10;
}

/** Lays out every GPU as one cell, wrapping nodes into rows `width` pixels wide. */
export function layoutHeatmap(gpus: IGpu[], width: number): IHeatmapLayout {
  const CELL = cellSize(gpus.length);
  const cells: ICellRect[] = [];
  const nodes: IBoxRect[] = [];
  const groups: IBoxRect[] = [];
  const usable = Math.max(width - 2 * MARGIN, 120);
  let y = MARGIN;
  let maxRight = 0;
  const tops = groupGpus(gpus);
  const nodeCount = tops.reduce((n, t) => n + t.nodes.length, 0);
  const LABEL = nodeCount <= MAX_LABELLED_NODES ? NODE_LABEL : 0;

  for (const top of tops) {
    const groupTop = y;
    y += GROUP_LABEL;
    let x = MARGIN;
    let rowHeight = 0;
    for (const node of top.nodes) {
      const count = node.gpus.length;
      const perRow = count <= 4 ? count : Math.ceil(count / 2);
      const rows = Math.ceil(count / perRow);
      // Extra horizontal gap where the switch/socket changes along a row.
      const offsets: number[] = [];
      let widest = 0;
      for (let r = 0; r < rows; r++) {
        let cx = 0;
        for (let c = 0; c < perRow; c++) {
          const k = r * perRow + c;
          if (k >= count) {
            break;
          }
          if (c > 0) {
            const changed =
              parentCell(gpus[node.gpus[k]]) !== parentCell(gpus[node.gpus[k - 1]]);
            cx += changed ? SUBGROUP_GAP + GAP : GAP;
          }
          offsets.push(cx);
          cx += CELL;
        }
        widest = Math.max(widest, cx);
      }
      const boxW = widest + 2 * NODE_PAD;
      const boxH = rows * CELL + (rows - 1) * GAP + 2 * NODE_PAD;
      if (x > MARGIN && x + boxW > MARGIN + usable) {
        x = MARGIN;
        y += rowHeight + NODE_GAP;
        rowHeight = 0;
      }
      nodes.push({ label: node.name, x, y: y + LABEL, w: boxW, h: boxH });
      for (let k = 0; k < count; k++) {
        const r = Math.floor(k / perRow);
        cells.push({
          gpu: node.gpus[k],
          x: x + NODE_PAD + offsets[k],
          y: y + LABEL + NODE_PAD + r * (CELL + GAP),
          w: CELL,
          h: CELL
        });
      }
      x += boxW + NODE_GAP;
      maxRight = Math.max(maxRight, x);
      rowHeight = Math.max(rowHeight, boxH + LABEL);
    }
    y += rowHeight;
    groups.push({ label: top.name, x: MARGIN, y: groupTop, w: usable, h: y - groupTop });
    y += GROUP_GAP;
  }
  return {
    width: Math.max(width, maxRight + MARGIN),
    height: y + MARGIN,
    cells,
    nodes,
    groups,
    nodeLabels: LABEL > 0
  };
}

/** The cell under a point, or null. Cells are in row order, so a linear scan is fast enough. */
export function hitTest(layout: IHeatmapLayout, x: number, y: number): ICellRect | null {
  for (const cell of layout.cells) {
    if (x >= cell.x && x < cell.x + cell.w && y >= cell.y && y < cell.y + cell.h) {
      return cell;
    }
  }
  return null;
}
