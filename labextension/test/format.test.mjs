// Unit tests of the words numbers are said in (src/format.ts, run from its build in lib/): node --test test/
// tests/client/test_one_voice.py checks the same functions against hive_lab.format, case by case; these pin
// the edges on their own (rounding, units, ranges, zones, the states a line is written for).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as f from '../lib/format.js';

const NOW = Date.parse('2026-11-27T12:00:00Z');
const ago = s => new Date(NOW - s * 1000).toISOString();

test('durations: tenths under 10 s (halves up), whole seconds under a minute, then two units', () => {
  const cases = [[0, '0.0 s'], [0.05, '0.1 s'], [9.94, '9.9 s'], [9.96, '10.0 s'], [10, '10 s'], [59.4, '59 s'],
    [60, '1 min 00 s'], [245, '4 min 05 s'], [3599, '59 min 59 s'], [3600, '1 h 00 min'], [7380, '2 h 03 min'],
    [86399, '23 h 59 min'], [86400, '1 d 0 h'], [273600, '3 d 4 h']];
  for (const [s, words] of cases) {
    assert.equal(f.duration(s), words, `${s} s`);
  }
});

test('GPU counts: singular for one and for a share of one', () => {
  assert.equal(f.gpusText(1), '1 GPU');
  assert.equal(f.gpusText(2, 'A100'), '2 A100 GPUs');
  assert.equal(f.gpusText(0.5), '0.5 GPU');
  assert.equal(f.gpusText(0), '0 GPUs');
  assert.equal(f.gpusText(null), '0 GPUs');
});

test("a node's GPUs: sorted, deduplicated, a run of three or more as a range", () => {
  assert.equal(f.gpuListText('node-0', []), 'node-0 (no GPU)');
  assert.equal(f.gpuListText('node-0', [3]), 'node-0 GPU 3');
  assert.equal(f.gpuListText('node-0', [1, 0]), 'node-0 GPU 0,1');
  assert.equal(f.gpuListText('node-0', [7, 6, 5, 4, 3, 2, 1, 0]), 'node-0 GPU 0-7');
  assert.equal(f.gpuListText('node-0', [3, 3, 2]), 'node-0 GPU 2,3');
  assert.equal(f.gpuListText('node-0', [0, 2, 5]), 'node-0 GPU 0,2,5');
  assert.equal(f.gpuName('node-1', 4), 'node-1 GPU 4');
});

test('a placement merges the tasks on one node and lists nodes in order of first use', () => {
  const placement = [{ node: 'node-1', gpus: [0, 1] }, { node: 'node-0', gpus: [3] }, { node: 'node-1', gpus: [2] }];
  assert.equal(f.placementText(placement), 'node-1 GPU 0-2; node-0 GPU 3');
  assert.equal(f.placementText(null), '');
  assert.equal(f.placementText([{ node: 'node-0', gpus: [] }]), 'node-0 (no GPU)');
});

test('time limits in the server\'s short form', () => {
  const cases = [[null, '-'], [0, '0s'], [0.5, '0.5s'], [90, '1m30s'], [5400, '1h30m'], [7200, '2h'],
    [90061, '1d1h1m1s']];
  for (const [s, words] of cases) {
    assert.equal(f.limitShort(s), words, `${s}`);
  }
});

test('a running job counts down to its deadline; a waiting one shows its limit', () => {
  const deadline = new Date(NOW + 4320 * 1000).toISOString();
  assert.equal(f.timeLimitText({ id: 'j', state: 'running', time_limit_s: 7200, deadline }, NOW),
    '1 h 12 min left of 2h');
  assert.equal(f.timeLimitText({ id: 'j', state: 'queued', time_limit_s: 7200, deadline }, NOW), '2h');
  assert.equal(f.timeLimitText({ id: 'j', state: 'running', time_limit_s: 60,
    deadline: new Date(NOW - 5000).toISOString() }, NOW), '0.0 s left of 1m');
  assert.equal(f.timeLimitText({ id: 'j', state: 'running', time_limit_s: null }, NOW), '-');
});

test('an estimate only for a waiting job with a basis; "any moment" within a second', () => {
  const job = { id: 'j', state: 'queued', estimated_start: new Date(NOW + 7380 * 1000).toISOString(),
    estimated_start_basis: 'when j-4 ends' };
  assert.equal(f.estimateText(job, NOW), 'starts in ~2 h 03 min (when j-4 ends)');
  assert.equal(f.estimateText(job, NOW, false), 'starts in ~2 h 03 min');
  assert.equal(f.estimateText({ ...job, estimated_start: new Date(NOW + 500).toISOString() }, NOW),
    'starts any moment (when j-4 ends)');
  assert.equal(f.estimateText({ ...job, estimated_start: null }, NOW), 'start unknown (when j-4 ends)');
  assert.equal(f.estimateText({ ...job, estimated_start_basis: null }, NOW), '');
  assert.equal(f.estimateText({ ...job, state: 'running' }, NOW), '');
});

test('progress: the rate of the GPU type it runs on, else the first measured one; three digits', () => {
  const job = { id: 'j', state: 'running', progress: { steps: 40, total_steps: 100, gpu_type: 'V100',
    rates: { V100: { steps_per_s: 4 }, K80: { steps_per_s: 1.23456 } }, estimated_finish: NOW / 1000 + 15 } };
  assert.equal(f.progressShort(job, NOW), 'step 40 of 100, 4 steps/s, about 15 s left');
  job.progress.gpu_type = 'A100';  // not measured on A100: the first measured type in name order (K80)
  assert.equal(f.progressShort(job, NOW), 'step 40 of 100, 1.23 steps/s, about 15 s left');
  assert.equal(f.progressShort({ id: 'j', state: 'running', progress: { steps: null } }, NOW), null);
  assert.equal(f.progressShort({ id: 'j', state: 'running', progress: { steps: 3 } }, NOW), 'step 3');
  assert.deepEqual([1234.5, 4, 0.25, 0.123456].map(f.threeDigits), ['1230', '4', '0.25', '0.123']);
});

test('one status line per state', () => {
  assert.equal(f.statusLine({ id: 'j-1', name: 'train', state: 'queued', submitted_at: ago(42),
    reason: 'waiting for 4 GPUs' }, NOW), 'j-1 train: queued for 42 s — waiting for 4 GPUs');
  assert.equal(f.statusLine({ id: 'j-2', state: 'running', started_at: ago(4.1), opportunistic: true,
    placement: [{ node: 'node-0', gpus: [2] }] }, NOW), 'j-2: running on node-0 GPU 2 for 4.1 s (opportunistic)');
  assert.equal(f.statusLine({ id: 'j-3', state: 'failed', exit_code: 1, started_at: ago(100),
    finished_at: ago(40), reason: 'out of memory' }, NOW), 'j-3: failed (exit code 1) after 1 min 00 s — out of memory');
  assert.equal(f.statusLine({ id: 'j-4', state: 'succeeded', exit_code: 0, started_at: ago(10),
    finished_at: ago(5), reason: 'done' }, NOW), 'j-4: succeeded (exit code 0) after 5.0 s');
  assert.equal(f.statusLine({ id: 'j-5', state: 'paused', reason: 'preempted' }, NOW), 'j-5: paused — preempted');
});

test('a moment in local time with its zone; "-" for none; the unparsable as given', () => {
  // process.env.TZ is set by the runner (tests/ui/test_labextension_units.py runs this file in two zones)
  const at = Date.parse('2026-07-01T12:42:00Z') / 1000;
  const text = f.whenText(at);
  const zone = process.env.TZ ?? 'UTC';
  const expected = { UTC: '2026-07-01 12:42 UTC', 'Europe/Paris': '2026-07-01 14:42 CEST',
    'Asia/Kolkata': '2026-07-01 18:12 UTC+5:30' }[zone];
  if (expected) {
    assert.equal(text, expected);
    assert.equal(f.whenText('2026-07-01T12:42:00Z'), expected);
  } else {
    assert.match(text, /^2026-07-0[12] \d\d:\d\d \S+$/);
  }
  assert.equal(f.whenText(null), '-');
  assert.equal(f.whenText(''), '-');
  assert.equal(f.whenText('not a time'), 'not a time');
  assert.equal(f.capitalized('starts in ~2 min'), 'Starts in ~2 min');
});
