// The background scan writes reports beside its judging: a pod's writes in order, different pods' at once, and the
// scan can wait for one pod's writes (before clearing a deleted pod's report) or for all (to call a scan complete).
import { test } from "node:test";
import assert from "node:assert/strict";
import { ReportQueue } from "../../../src/scan/report-queue.ts";

/** A write that starts when the queue runs it and ends when the test says so. */
function gatedWrites() {
  const log: string[] = [];
  const gates = new Map<string, () => void>();
  const write = (name: string) => async () => {
    log.push(`start ${name}`);
    await new Promise<void>((resolve) => gates.set(name, resolve));
    log.push(`end ${name}`);
  };
  const finish = async (name: string) => {
    for (let i = 0; i < 10 && !gates.has(name); i++) await new Promise((resolve) => setImmediate(resolve));
    const open = gates.get(name);
    assert.ok(open, `${name} was started`);
    open();
    await new Promise((resolve) => setImmediate(resolve));
  };
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  return { log, write, finish, turn };
}

test("a pod's writes run one after another, in the order they were queued", async () => {
  const w = gatedWrites();
  const q = new ReportQueue(() => {});
  q.add("pod-a", w.write("a1"));
  q.add("pod-a", w.write("a2"));
  q.add("pod-a", w.write("a3"));
  await w.turn();
  assert.deepEqual(w.log, ["start a1"], "the second waits for the first");
  await w.finish("a1");
  assert.deepEqual(w.log, ["start a1", "end a1", "start a2"]);
  await w.finish("a2");
  await w.finish("a3");
  assert.deepEqual(w.log, ["start a1", "end a1", "start a2", "end a2", "start a3", "end a3"]);
  assert.equal(q.size, 0);
});

test("different pods' writes run at once", async () => {
  const w = gatedWrites();
  const q = new ReportQueue(() => {});
  q.add("pod-a", w.write("a"));
  q.add("pod-b", w.write("b"));
  await w.turn();
  assert.deepEqual(w.log, ["start a", "start b"]);
  assert.equal(q.size, 2);
  await w.finish("b");
  assert.equal(q.size, 1);
  await w.finish("a");
  assert.equal(q.size, 0);
});

test("settled waits for one pod's writes, all for every pod's; each end is told", async () => {
  const w = gatedWrites();
  let ends = 0;
  const q = new ReportQueue(() => ends++);
  q.add("pod-a", w.write("a1"));
  q.add("pod-a", w.write("a2"));
  q.add("pod-b", w.write("b"));
  let aSettled = false;
  let allSettled = false;
  void q.settled("pod-a").then(() => (aSettled = true));
  void q.all().then(() => (allSettled = true));
  await w.finish("a1");
  assert.equal(aSettled, false, "a2 is still to come");
  await w.finish("a2");
  await w.turn();
  assert.equal(aSettled, true);
  assert.equal(allSettled, false, "b is still on its way");
  await w.finish("b");
  await w.turn();
  assert.equal(allSettled, true);
  assert.equal(ends, 3);
  // A pod with nothing on its way: settled at once.
  await q.settled("pod-c");
});
