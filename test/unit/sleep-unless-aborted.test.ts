// The retry loops' abortable sleep (sleepUnlessAborted: list-and-watch backoff, image review backends): it waits
// the time asked, ends at once when the owner closes, and leaves no listener on the owner's signal behind, however
// many backoffs a long-lived loop sleeps (an 'abort' listener per sleep would pile up on a signal that lives as
// long as the process).
import { test } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { sleepUnlessAborted } from "../../src/async/sleep-unless-aborted.ts";

test("waits the time asked, and leaves no listener behind", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const owner = new AbortController();
  let done = false;
  const sleeping = sleepUnlessAborted(1_000, owner.signal).then(() => (done = true));
  assert.equal(getEventListeners(owner.signal, "abort").length, 1);
  t.mock.timers.tick(999);
  await Promise.resolve();
  assert.equal(done, false);
  t.mock.timers.tick(1);
  await sleeping;
  assert.equal(done, true);
  assert.equal(getEventListeners(owner.signal, "abort").length, 0);
});

test("ends at once when the owner closes, or has closed", async () => {
  const owner = new AbortController();
  const sleeping = sleepUnlessAborted(3_600_000, owner.signal);
  owner.abort();
  await sleeping;
  assert.equal(getEventListeners(owner.signal, "abort").length, 0);
  await sleepUnlessAborted(3_600_000, owner.signal);
});
