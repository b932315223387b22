// The background scan's rate holds on average without a timer per pod: it waits only when ahead by more than a
// few milliseconds, and catches up after a slow stretch by at most a second's worth of pods.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ScanPacer } from "../../../src/scan/scan-pacer.ts";

function clock() {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

test("at 20 a second each pod waits 50 ms after the one before, as it always did", () => {
  const c = clock();
  const pacer = new ScanPacer(20, c.now);
  assert.equal(pacer.started(), 50);
  c.advance(50);
  assert.equal(pacer.started(), 50);
  c.advance(60); // this pod started 10 ms late: the one after it waits less
  assert.equal(pacer.started(), 40);
});

test("at 10,000 a second no pod waits until the scan is 5 ms ahead, and 1 s of pods takes 1 s", () => {
  const c = clock();
  const pacer = new ScanPacer(10_000, c.now);
  let waited = 0;
  let waits = 0;
  for (let i = 0; i < 10_000; i++) {
    const wait = pacer.started();
    if (wait > 0) {
      assert.ok(wait > 5 && wait <= 5.2, `waits only when more than 5 ms ahead (${wait})`);
      waits++;
      waited += wait;
      c.advance(wait);
    }
  }
  // Judging took no time here: the pacer alone holds the scan to its rate, with about one wait per 5 ms of pods.
  assert.ok(waits >= 150 && waits <= 200, `${waits} waits`);
  assert.ok(waited >= 990 && waited <= 1_000, `${waited} ms`);
});

test("after a slow stretch the scan catches up by at most a second's worth of pods", () => {
  const c = clock();
  const pacer = new ScanPacer(100, c.now);
  pacer.started();
  c.advance(600); // 60 pods' worth behind: they may start at once
  let atOnce = 0;
  while (pacer.started() === 0) atOnce++;
  assert.ok(atOnce >= 55 && atOnce <= 60, `${atOnce} at once`);
  const d = clock();
  const late = new ScanPacer(100, d.now);
  late.started();
  d.advance(60_000); // a minute behind: not 6,000 at once, the rate starts again from now
  assert.equal(late.started(), 10);
});
