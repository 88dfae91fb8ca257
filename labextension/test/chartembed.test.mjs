// Unit tests of drawing a chart into its host (src/chartembed.ts, run from its build in lib/): node --test test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

globalThis.document = { createElement: tag => ({ tag }) };
const { embedInto } = await import('../lib/chartembed.js');

/** BokehJS as the page has it once loaded; each draw waits until the test settles it. */
function fakeBokeh() {
  const draws = [];
  const bokeh = { version: 'test', embed: { embed_item: (item, target) => new Promise((resolve, reject) => draws.push({ item, target, resolve, reject })) } };
  return { draws, loaded: Promise.resolve(bokeh) };
}

function fakeHost() {
  return { children: [], replaceChildren(...children) { this.children = children; } };
}

async function until(condition) {
  for (let i = 0; i < 1000 && !condition(); i++) {
    await new Promise(resolve => setImmediate(resolve));
  }
  assert.ok(condition());
}

test('a draw overtaken by a later one for the same host ends quietly; the later one draws', async () => {
  const { draws, loaded } = fakeBokeh();
  const host = fakeHost();
  const first = embedInto(host, '{"chart": 1}', loaded);
  await until(() => draws.length === 1);
  const second = embedInto(host, '{"chart": 2}', loaded);
  await until(() => draws.length === 2);
  assert.deepEqual(host.children, [draws[1].target]); // the second's target replaced the first's
  draws[0].reject(new Error('element [object HTMLDivElement] must be under <body>'));
  await first; // not rejected: the charts are not replaced by its error
  draws[1].resolve();
  await second;
  assert.deepEqual(draws[1].item, { chart: 2 });
});

test('a draw that fails on its own says so', async () => {
  const { draws, loaded } = fakeBokeh();
  const only = embedInto(fakeHost(), '{"chart": 3}', loaded);
  await until(() => draws.length === 1);
  draws[0].reject(new Error('bad model'));
  await assert.rejects(only, /bad model/);
});

test('a draw overtaken while BokehJS loads never starts', async () => {
  const { draws, loaded } = fakeBokeh();
  const host = fakeHost();
  const first = embedInto(host, '{"chart": 4}', loaded);
  const second = embedInto(host, '{"chart": 5}', loaded);
  await Promise.all([first, (async () => { await until(() => draws.length === 1); draws[0].resolve(); await second; })()]);
  assert.equal(draws.length, 1);
  assert.deepEqual(draws[0].item, { chart: 5 });
});
