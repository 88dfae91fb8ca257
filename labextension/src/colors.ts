/**
 * Colours of heatmap cells. States use fixed, theme-independent colours; VCs, jobs and users
 * get stable colours from a qualitative palette (same name -> same colour on every render).
 */
import { IGpu } from './api';
import { ColorMode } from './model';

export const STATE_COLORS: Record<string, string> = {
  free: '#9aa5b1',
  used: '#2f80ed',
  reserved: '#9b51e0',
  opportunistic: '#f2994a',
  bad: '#eb5757',
  drained: '#4f4f4f'
};

/** Cells without a VC/job/user in the chosen mode (free GPUs). */
export const NONE_COLOR = '#c9d1d9';

const PALETTE = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#17becf',
  '#bcbd22',
  '#393b79',
  '#637939',
  '#8c6d31',
  '#843c39',
  '#7b4173',
  '#3182bd',
  '#e6550d'
];

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

export function colorForName(name: string): string {
  return PALETTE[hash(name) % PALETTE.length];
}

/** The state a person should see for a GPU: bad and drained win over used/free. */
export function gpuState(gpu: IGpu): string {
  if (gpu.bad) {
    return 'bad';
  }
  if (gpu.drained) {
    return 'drained';
  }
  if (gpu.state === 'used' && gpu.opportunistic) {
    return 'opportunistic';
  }
  const state = gpu.state ?? '';
  return state in STATE_COLORS ? state : gpu.job ? 'used' : 'free';
}

/** The key a GPU is coloured by in a mode (null: no owner, drawn with NONE_COLOR). */
export function colorKey(
  gpu: IGpu,
  mode: ColorMode,
  jobVcs?: ReadonlyMap<string, string>
): string | null {
  switch (mode) {
    case 'state':
      return gpuState(gpu);
    case 'job':
      return gpu.job ?? null;
    case 'user':
      return gpu.user ?? null;
    case 'vc':
    default:
      // Opportunistic GPUs are bound to no VC: they show the VC of the job borrowing them.
      return gpu.vc ?? (gpu.job ? jobVcs?.get(gpu.job) ?? null : null);
  }
}

export function colorFor(key: string | null, mode: ColorMode): string {
  if (mode === 'state') {
    return STATE_COLORS[key ?? 'free'] ?? NONE_COLOR;
  }
  return key === null ? NONE_COLOR : colorForName(key);
}
