// Policy resources reload soon after one change, and at most every interval while changes keep coming, each reload
// taking what came since the last, and one after the last change.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { coalesceChanges } from "../../src/async/change-coalescer.ts";

function coalescer(t: TestContext) {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 });
  const runs: number[] = [];
  const c = coalesceChanges(() => runs.push(Date.now() - 1_000_000), 20, 200);
  return { c, runs };
}

test("one change after a quiet spell runs after the settle time, not the interval", (t) => {
  const { c, runs } = coalescer(t);
  c.changed();
  t.mock.timers.tick(19);
  assert.deepEqual(runs, []);
  t.mock.timers.tick(1);
  assert.deepEqual(runs, [20]);
  // Long after: again only the settle time.
  t.mock.timers.tick(5_000);
  c.changed();
  t.mock.timers.tick(20);
  assert.deepEqual(runs, [20, 5_040]);
});

test("changes within the settle time are one run", (t) => {
  const { c, runs } = coalescer(t);
  c.changed();
  t.mock.timers.tick(10);
  c.changed();
  c.changed();
  t.mock.timers.tick(10);
  assert.deepEqual(runs, [20]);
  t.mock.timers.tick(1_000);
  assert.deepEqual(runs, [20]);
});

test("a stream of changes runs at most once per interval, and once after the last change", (t) => {
  const { c, runs } = coalescer(t);
  // A change every 10 ms for one second (kubectl applying many objects).
  for (let ms = 0; ms < 1_000; ms += 10) {
    c.changed();
    t.mock.timers.tick(10);
  }
  for (let ms = 0; ms < 1_000; ms += 10) t.mock.timers.tick(10);
  assert.deepEqual(runs, [20, 220, 420, 620, 820, 1_020]);
  for (let i = 1; i < runs.length; i++) assert.ok(runs[i]! - runs[i - 1]! >= 200);
  // The last run came after the last change (at 990 ms): nothing is left unseen.
  assert.ok(runs.at(-1)! > 990);
});

test("closed: a scheduled run is dropped and changes schedule nothing", (t) => {
  const { c, runs } = coalescer(t);
  c.changed();
  c.close();
  c.changed();
  t.mock.timers.tick(1_000);
  assert.deepEqual(runs, []);
});
