// Unit tests of the heatmap's pure layout (src/layout.ts, run from its build in lib/): node --test test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cellSize, groupGpus, hitTest, layoutHeatmap, MAX_LABELLED_NODES, NODE_LABEL } from '../lib/layout.js';

/** `nodes` nodes of `perNode` GPUs; each node in rack `rack-(n % racks)`, its GPUs in sockets of `perSocket`. */
function cluster(nodes, perNode, { racks = 1, perSocket = perNode } = {}) {
  const gpus = [];
  for (let n = 0; n < nodes; n++) {
    for (let i = 0; i < perNode; i++) {
      const node = `node-${n}`;
      gpus.push({
        node, index: i, uuid: null, type: 'V100', state: 'free', vc: null, job: null, user: null,
        opportunistic: false, utilization: null, memory_used_mb: null, bad: false, drained: false,
        path: [`rack-${n % racks}`, node, `${node}/socket-${Math.floor(i / perSocket)}`]
      });
    }
  }
  return gpus;
}

function overlaps(a, b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

test('groups GPUs by top cell, then node, keeping the server order', () => {
  const gpus = cluster(4, 2, { racks: 2 });
  const tops = groupGpus(gpus);
  assert.deepEqual(tops.map(t => t.name), ['rack-0', 'rack-1']);
  assert.deepEqual(tops[0].nodes.map(n => [n.name, n.gpus]), [['node-0', [0, 1]], ['node-2', [4, 5]]]);
  assert.deepEqual(tops[1].nodes.map(n => [n.name, n.gpus]), [['node-1', [2, 3]], ['node-3', [6, 7]]]);
});

test('a GPU whose path has no cell above its node falls in the group "cluster"', () => {
  const gpus = cluster(1, 2).map(g => ({ ...g, path: [g.node] }));
  assert.deepEqual(groupGpus(gpus).map(t => t.name), ['cluster']);
  const noPath = cluster(1, 1).map(g => ({ ...g, path: undefined }));
  assert.deepEqual(groupGpus(noPath).map(t => t.name), ['cluster']);
});

test('every GPU gets exactly one cell, inside its node box, and no two cells overlap', () => {
  for (const [nodes, perNode, racks] of [[1, 4, 1], [6, 8, 2], [40, 8, 4], [3, 5, 1]]) {
    const gpus = cluster(nodes, perNode, { racks, perSocket: 4 });
    const layout = layoutHeatmap(gpus, 600);
    assert.equal(layout.cells.length, gpus.length);
    assert.deepEqual(layout.cells.map(c => c.gpu).sort((a, b) => a - b), gpus.map((_, i) => i));
    for (let i = 0; i < layout.cells.length; i++) {
      for (let j = i + 1; j < layout.cells.length; j++) {
        assert.ok(!overlaps(layout.cells[i], layout.cells[j]), `cells ${i} and ${j} overlap`);
      }
    }
    for (const cell of layout.cells) {
      const box = layout.nodes.find(b => b.label === gpus[cell.gpu].node);
      assert.ok(cell.x >= box.x && cell.x + cell.w <= box.x + box.w, 'cell inside its node box (x)');
      assert.ok(cell.y >= box.y && cell.y + cell.h <= box.y + box.h, 'cell inside its node box (y)');
    }
    for (const cell of layout.cells) {
      assert.ok(cell.x + cell.w <= layout.width && cell.y + cell.h <= layout.height, 'cell on the canvas');
    }
  }
});

test('nodes wrap into rows no wider than the canvas (when a node fits at all)', () => {
  const gpus = cluster(20, 8);
  const layout = layoutHeatmap(gpus, 400);
  assert.equal(layout.width, 400);
  for (const box of layout.nodes) {
    assert.ok(box.x + box.w <= 400, `${box.label} ends at ${box.x + box.w}`);
  }
  const rows = new Set(layout.nodes.map(b => b.y));
  assert.ok(rows.size > 1, 'twenty 8-GPU nodes do not fit in one 400 px row');
});

test('a canvas narrower than one node widens to hold it', () => {
  const layout = layoutHeatmap(cluster(1, 16), 50);
  const box = layout.nodes[0];
  assert.ok(layout.width >= box.x + box.w, 'the node fits the reported width');
});

test('a socket change along a row leaves a wider gap than between GPUs of one socket', () => {
  const gpus = cluster(1, 8, { perSocket: 2 });  // 8 GPUs: 2 rows of 4, a socket change every 2
  const row = layoutHeatmap(gpus, 800).cells.filter(c => c.gpu < 4).sort((a, b) => a.x - b.x);
  const gaps = row.slice(1).map((c, i) => c.x - (row[i].x + row[i].w));
  assert.equal(gaps[0], gaps[2]);
  assert.ok(gaps[1] > gaps[0], `gaps ${gaps}`);
});

test('cell size shrinks as the cluster grows', () => {
  assert.deepEqual([4, 16, 17, 128, 129, 1024, 1025, 20000].map(cellSize), [30, 30, 18, 18, 14, 14, 10, 10]);
});

test('node names are labelled up to MAX_LABELLED_NODES nodes, never beyond', () => {
  const few = layoutHeatmap(cluster(3, 1), 600);
  assert.equal(few.nodeLabels, true);
  const cell = few.cells[0];
  const box = few.nodes[0];
  assert.ok(box.y >= NODE_LABEL, 'room for the name above the box');
  assert.ok(cell.y > box.y);
  const many = layoutHeatmap(cluster(MAX_LABELLED_NODES + 1, 1), 2000);
  assert.equal(many.nodeLabels, false);
});

test('hitTest finds the cell under a point and nothing between cells', () => {
  const gpus = cluster(2, 4);
  const layout = layoutHeatmap(gpus, 600);
  for (const cell of layout.cells) {
    assert.equal(hitTest(layout, cell.x, cell.y)?.gpu, cell.gpu);
    assert.equal(hitTest(layout, cell.x + cell.w - 0.5, cell.y + cell.h - 0.5)?.gpu, cell.gpu);
  }
  const first = layout.cells[0];
  assert.equal(hitTest(layout, first.x + first.w, first.y), null, 'the right edge belongs to the gap');
  assert.equal(hitTest(layout, 0, 0), null);
  assert.equal(hitTest(layout, layout.width + 10, layout.height + 10), null);
});
