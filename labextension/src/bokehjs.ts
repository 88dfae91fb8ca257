/**
 * BokehJS for the charts an array cell saved (hive_lab/array_charts.py: Bokeh's JSON, `json_item`).
 *
 * A reopened notebook has no kernel to put BokehJS into the page, so the extension loads the server's own
 * copy (`GET hive_lab/static/bokeh/bokeh.min.js`, the Bokeh that made the charts) once, through
 * ServerConnection (the session's token), and embeds each chart with `Bokeh.embed.embed_item`.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { embedInto, IBokeh } from './chartembed';

let loading: Promise<IBokeh> | null = null;

/** window.Bokeh, loading it from the server the first time (a kernel's output_notebook may have already). */
export function loadBokeh(settings: ServerConnection.ISettings): Promise<IBokeh> {
  const existing = (window as any).Bokeh as IBokeh | undefined;
  if (existing?.embed) {
    return Promise.resolve(existing);
  }
  if (!loading) {
    loading = (async () => {
      const url = URLExt.join(settings.baseUrl, 'hive_lab', 'static', 'bokeh', 'bokeh.min.js');
      const response = await ServerConnection.makeRequest(url, {}, settings);
      if (!response.ok) {
        throw new Error(`BokehJS could not be loaded (${response.status} ${response.statusText})`);
      }
      const script = document.createElement('script');
      script.textContent = await response.text();
      document.head.appendChild(script);
      const bokeh = (window as any).Bokeh as IBokeh | undefined;
      if (!bokeh?.embed) {
        throw new Error('BokehJS did not start');
      }
      return bokeh;
    })();
    loading.catch(() => {
      loading = null; // try again with the next chart
    });
  }
  return loading;
}

/** Draws Bokeh's JSON into `host` with the page's BokehJS (see `chartembed.embedInto`). */
export function embedChart(settings: ServerConnection.ISettings, item: string, host: HTMLElement): Promise<void> {
  return embedInto(host, item, loadBokeh(settings));
}
