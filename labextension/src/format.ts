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

