// Unit tests of the heatmap's colours (src/colors.ts, run from its build in lib/): node --test test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { colorFor, colorForName, colorKey, gpuState, NONE_COLOR, STATE_COLORS } from '../lib/colors.js';

function gpu(fields) {
  return {
    node: 'node-0', index: 0, uuid: null, type: null, state: 'free', vc: null, job: null, user: null,
    opportunistic: false, utilization: null, memory_used_mb: null, bad: false, drained: false, path: [],
    ...fields
  };
}

test('bad and drained win over the scheduling state', () => {
  assert.equal(gpuState(gpu({ state: 'used', job: 'j-1', bad: true, drained: true })), 'bad');
  assert.equal(gpuState(gpu({ state: 'used', job: 'j-1', drained: true })), 'drained');
});

test('a used GPU lent to another VC shows as opportunistic', () => {
  assert.equal(gpuState(gpu({ state: 'used', job: 'j-1', opportunistic: true })), 'opportunistic');
  assert.equal(gpuState(gpu({ state: 'used', job: 'j-1' })), 'used');
});

test('an unknown state falls back on whether a job holds the GPU', () => {
  assert.equal(gpuState(gpu({ state: 'mystery', job: 'j-1' })), 'used');
  assert.equal(gpuState(gpu({ state: 'mystery' })), 'free');
  assert.equal(gpuState(gpu({ state: 'reserved' })), 'reserved');
});

test('the same name always gets the same palette colour; different names spread over the palette', () => {
  assert.equal(colorForName('course-a'), colorForName('course-a'));
  const colours = new Set(Array.from({ length: 64 }, (_, i) => colorForName(`vc-${i}`)));
  assert.ok(colours.size >= 10, `64 names got only ${colours.size} colours`);
  for (const c of colours) {
    assert.match(c, /^#[0-9a-f]{6}$/);
  }
});

test('each mode colours by its own key', () => {
  const g = gpu({ state: 'used', vc: 'course-a', job: 'j-7', user: 'ann' });
  assert.equal(colorKey(g, 'state'), 'used');
  assert.equal(colorKey(g, 'vc'), 'course-a');
  assert.equal(colorKey(g, 'job'), 'j-7');
  assert.equal(colorKey(g, 'user'), 'ann');
});

test("an opportunistic GPU (bound to no VC) shows the VC of the job borrowing it", () => {
  const lent = gpu({ state: 'used', vc: null, job: 'j-9', opportunistic: true });
  assert.equal(colorKey(lent, 'vc', new Map([['j-9', 'course-b']])), 'course-b');
  assert.equal(colorKey(lent, 'vc', new Map()), null);
  assert.equal(colorKey(lent, 'vc'), null);
  assert.equal(colorKey(gpu({}), 'vc'), null);
});

test('free GPUs and unknown states get the neutral colour', () => {
  assert.equal(colorFor(null, 'vc'), NONE_COLOR);
  assert.equal(colorFor(null, 'state'), STATE_COLORS.free);
  assert.equal(colorFor('nonsense', 'state'), NONE_COLOR);
  assert.equal(colorFor('bad', 'state'), STATE_COLORS.bad);
  assert.equal(colorFor('course-a', 'vc'), colorForName('course-a'));
});
