/**
 * Drawing Bokeh's JSON into a host element (`bokehjs.embedChart` gives it the page's BokehJS). Kept free of
 * JupyterLab's modules so its unit test runs in Node (test/chartembed.test.mjs).
 */

/** The part of BokehJS used here. */
export interface IBokeh {
  version: string;
  embed: { embed_item(item: unknown, target: HTMLElement): Promise<unknown> };
}

const drawing = new WeakMap<HTMLElement, number>();

/**
 * Draws Bokeh's JSON (`json_item`, as a string: its order matters, and a saved notebook's keys are sorted)
 * into `host`, emptied first, once `bokeh` is there. Of overlapping calls for one host, only the last draws:
 * an earlier one whose target a later call replaced while BokehJS drew into it (Bokeh: "element ... must be
 * under <body>") ends quietly, as one the later call overtook before it began. (A live array cell redraws its
 * charts as its elements end, so under load its draws overlap: the first one's failure used to replace the
 * charts with its error.)
 */
export async function embedInto(host: HTMLElement, item: string, bokeh: Promise<IBokeh>): Promise<void> {
  const turn = (drawing.get(host) ?? 0) + 1;
  drawing.set(host, turn);
  const loaded = await bokeh;
  if (drawing.get(host) !== turn) {
    return;
  }
  const target = document.createElement('div');
  host.replaceChildren(target);
  try {
    await loaded.embed.embed_item(JSON.parse(item), target);
  } catch (error) {
    if (drawing.get(host) !== turn) {
      return; // overtaken: the later call draws
    }
    throw error;
  }
}
