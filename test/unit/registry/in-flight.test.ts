// InFlight: concurrent callers share one request; with a TTL the result is kept that long; failures never are.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InFlight } from "../../../src/registry/in-flight.ts";

const gaveUp = () => new Error("gave up");

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

test("callers share one pending task; without a TTL it is forgotten once settled", async () => {
  const shared = new InFlight<number>();
  let started = 0;
  const task = () => {
    started++;
    return Promise.resolve(started);
  };
  assert.deepEqual(await Promise.all([shared.run("k", task, undefined, gaveUp), shared.run("k", task, undefined, gaveUp)]), [1, 1]);
  assert.equal(await shared.run("k", task, undefined, gaveUp), 2);
  assert.equal(await shared.run("other", task, undefined, gaveUp), 3);
});

test("with a TTL a result is kept until the TTL has passed since it arrived", async () => {
  let clock = 1_000;
  const cache = new InFlight<number>({ ttlMs: 100, now: () => clock });
  let started = 0;
  const pending = deferred<number>();
  const task = () => {
    started++;
    return started === 1 ? pending.promise : Promise.resolve(started);
  };
  const first = cache.run("k", task, undefined, gaveUp);
  clock += 500; // time spent waiting for the answer does not count
  pending.resolve(1);
  assert.equal(await first, 1);
  clock += 99;
  assert.equal(await cache.run("k", task, undefined, gaveUp), 1);
  clock += 1;
  assert.equal(await cache.run("k", task, undefined, gaveUp), 2);
  assert.equal(started, 2);
});

test("a failure is shared by the callers waiting for it, then forgotten", async () => {
  const cache = new InFlight<number>({ ttlMs: 10_000 });
  let started = 0;
  const task = () => (++started === 1 ? Promise.reject(new Error("boom")) : Promise.resolve(7));
  const waiting = [cache.run("k", task, undefined, gaveUp), cache.run("k", task, undefined, gaveUp)];
  for (const w of waiting) await assert.rejects(w, /boom/);
  assert.equal(await cache.run("k", task, undefined, gaveUp), 7);
  assert.equal(started, 2);
});

test("a caller's signal ends only its own wait; an aborted one starts nothing", async () => {
  const cache = new InFlight<string>({ ttlMs: 10_000 });
  const pending = deferred<string>();
  let started = 0;
  const task = () => {
    started++;
    return pending.promise;
  };
  const controller = new AbortController();
  const impatient = cache.run("k", task, controller.signal, gaveUp);
  const patient = cache.run("k", task, undefined, gaveUp);
  controller.abort();
  await assert.rejects(impatient, /gave up/);
  pending.resolve("done");
  assert.equal(await patient, "done");
  assert.equal(started, 1);
  await assert.rejects(cache.run("fresh", task, controller.signal, gaveUp), /gave up/);
  assert.equal(started, 1);
});

test("sweeping expired results (once many are kept) keeps the live ones", async () => {
  let clock = 0;
  const cache = new InFlight<number>({ ttlMs: 10, now: () => clock });
  let started = 0;
  const task = () => Promise.resolve(++started);
  await cache.run("live", task, undefined, gaveUp);
  clock = 5;
  for (let i = 0; i < 1_000; i++) await cache.run(`k${i}`, task, undefined, gaveUp);
  clock = 14; // "live" expired at 10, the others live until 15
  assert.equal(await cache.run("live", task, undefined, gaveUp), 1_002); // sweeps "live"'s stale copy
  assert.equal(await cache.run("k0", task, undefined, gaveUp), 2);
  assert.equal(await cache.run("k999", task, undefined, gaveUp), 1_001);
});

test("peek gives a kept result until its TTL has passed, never a pending or failed one, and starts nothing", async () => {
  let clock = 1_000;
  const cache = new InFlight<string>({ ttlMs: 100, now: () => clock });
  assert.equal(cache.peek("k"), undefined);
  const pending = deferred<string>();
  const first = cache.run("k", () => pending.promise);
  assert.equal(cache.peek("k"), undefined, "still pending");
  pending.resolve("read");
  await first;
  assert.equal(cache.peek("k"), "read");
  clock += 99;
  assert.equal(cache.peek("k"), "read");
  clock += 1;
  assert.equal(cache.peek("k"), undefined, "expired");
  await assert.rejects(
    cache.run("f", () => Promise.reject(new Error("refused"))),
    /refused/,
  );
  assert.equal(cache.peek("f"), undefined, "a failure is never kept");
  const untimed = new InFlight<string>();
  await untimed.run("k", () => Promise.resolve("once"));
  assert.equal(untimed.peek("k"), undefined, "without a TTL nothing is kept");
});
