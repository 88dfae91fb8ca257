/**
 * The words numbers are said in, the same as hive_lab.format's (the CLI, the widgets, the cell lines):
 * one voice across every surface.
 */

/** `3.2 s`, `4 min 05 s`, `2 h 03 min`, `3 d 4 h`: hive_lab.format.duration's words. */
export function duration(seconds: number): string {
  if (seconds < 60) {
    return seconds < 10 ? `${seconds.toFixed(1)} s` : `${Math.round(seconds)} s`;
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) {
    return `${minutes} min ${pad(Math.floor(seconds) % 60)} s`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 24) {
    return `${hours} h ${pad(minutes % 60)} min`;
  }
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}


/** `1 GPU`, `2 A100 GPUs`, `0.5 GPU` (a share of one GPU), `0 GPUs`: hive_lab.format.gpus_text's words. */
export function gpusText(gpus: number | null | undefined, gpuType?: string | null): string {
  const n = Number(gpus ?? 0);
  const kind = gpuType ? ` ${gpuType}` : '';
  return `${n}${kind} GPU${n === 1 || (n > 0 && n < 1) ? '' : 's'}`;
}

/** `node-0 GPU 2,3` / `node-0 GPU 0-7; node-1 GPU 0-7` / `node-0 (no GPU)`: hive_lab.format.placement_text's. */
export function placementText(placement: { node: string; gpus: number[] }[] | null | undefined): string {
  const byNode = new Map<string, number[]>();
  for (const task of placement ?? []) {
    byNode.set(task.node, [...(byNode.get(task.node) ?? []), ...(task.gpus ?? [])]);
  }
  const parts: string[] = [];
  for (const [node, all] of byNode) {
    const gpus = Array.from(new Set(all)).sort((a, b) => a - b);
    if (gpus.length === 0) {
      parts.push(`${node} (no GPU)`);
    } else if (gpus.length > 2 && gpus[gpus.length - 1] - gpus[0] === gpus.length - 1) {
      parts.push(`${node} GPU ${gpus[0]}-${gpus[gpus.length - 1]}`);
    } else {
      parts.push(`${node} GPU ${gpus.join(',')}`);
    }
  }
  return parts.join('; ');
}
