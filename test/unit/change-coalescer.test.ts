// Policy resources reload 20 ms after a change that follows a quiet spell (one edit takes effect at once), and once
// after a stream of changes (thousands applied), when none came for 200 ms.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { coalesceChanges } from "../../src/async/change-coalescer.ts";

function coalescer(t: TestContext) {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 });
  const runs: number[] = [];
  const c = coalesceChanges(() => runs.push(Date.now() - 1_000_000), 20, 200);
  const tick = (ms: number) => {
    for (let i = 0; i < ms; i++) t.mock.timers.tick(1);
  };
  return { c, runs, tick };
}

test("one change after a quiet spell runs after the settle time", (t) => {
  const { c, runs, tick } = coalescer(t);
  c.changed();
  tick(19);
  assert.deepEqual(runs, []);
  tick(1);
  assert.deepEqual(runs, [20]);
  // Long after: again only the settle time.
  tick(5_000);
  c.changed();
  tick(20);
  assert.deepEqual(runs, [20, 5_040]);
});

test("a stream of changes is one run, when none came for the quiet time", (t) => {
  const { c, runs, tick } = coalescer(t);
  // A change every 10 ms for one second (kubectl applying many objects).
  for (let ms = 0; ms < 1_000; ms += 10) {
    c.changed();
    tick(10);
  }
  tick(1_000);
  // The last change came at 990 ms.
  assert.deepEqual(runs, [1_190]);
});

test("a change soon after a run is part of a stream: it waits for the quiet time", (t) => {
  const { c, runs, tick } = coalescer(t);
  c.changed();
  tick(20);
  assert.deepEqual(runs, [20]);
  tick(50);
  c.changed(); // 70 ms after the last change
  tick(199);
  assert.deepEqual(runs, [20]);
  tick(1);
  assert.deepEqual(runs, [20, 270]);
});

test("closed: a pending run is dropped and changes schedule nothing", (t) => {
  const { c, runs, tick } = coalescer(t);
  c.changed();
  c.close();
  c.changed();
  tick(1_000);
  assert.deepEqual(runs, []);
});
