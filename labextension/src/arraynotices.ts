/**
 * A notification when one of my job arrays has ended (every element), with its counts: its elements that
 * succeed are not announced one by one (jobnotices.ts skips them; a sweep of 20 made 20 toasts), a failed
 * one still is. Only arrays this page saw before they ended are announced.
 */
import { arrayCountsText, IArray } from './api';
import { ClusterModel } from './model';
import { notify } from './notify';

/** `sweep (a-000003) ended: 18 succeeded, 2 failed`. */
export function arrayEndedText(array: IArray): string {
  return `${array.name || array.id} (${array.id}) ended: ${arrayCountsText(array.counts)}`;
}

export function announceArrayEnds(model: ClusterModel): void {
  const watching = new Set<string>();
  model.changed.connect(() => {
    for (const array of model.myArrays) {
      if (array.state !== 'ended') {
        watching.add(array.id);
      } else if (watching.delete(array.id)) {
        const ok = Object.keys(array.counts).every(s => s === 'succeeded' || !array.counts[s]);
        notify(arrayEndedText(array), ok ? 'success' : 'warning', { autoClose: ok ? 8000 : false });
      }
    }
  });
}
