// The leader election's decision, given the Lease read, when this candidate first saw that version of it, and the
// time. The writes themselves run against a real kube-apiserver in test/e2e/self-managed-tls.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { KubeClient } from "../../src/kube/kube-client.ts";
import { LeaderElector, microTime, observeLease, planLeaseStep, type LeaseObservation, type LeaseRecord } from "../../src/kube/leader-election.ts";

const DEFAULT_MS = 15_000;
const lease = (holder: string | undefined, seconds: number | undefined = 15, rv = "7"): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: seconds,
  resourceVersion: rv,
});

test("no Lease: create it", () => {
  assert.deepEqual(planLeaseStep(undefined, "a", { resourceVersion: undefined, at: 0 }, 0, DEFAULT_MS), { action: "create" });
});

test("our own Lease: renew it", () => {
  assert.deepEqual(planLeaseStep(lease("a"), "a", { resourceVersion: "7", at: 0 }, 1_000_000, DEFAULT_MS), { action: "renew" });
});

test("a released Lease (no holder) is taken over at once", () => {
  assert.deepEqual(planLeaseStep(lease(""), "b", { resourceVersion: "7", at: 1000 }, 1000, DEFAULT_MS), { action: "take-over", reason: "released" });
  assert.deepEqual(planLeaseStep(lease(undefined), "b", { resourceVersion: "7", at: 1000 }, 1000, DEFAULT_MS), { action: "take-over", reason: "released" });
});

test("another holder's Lease is followed until it has not changed for a whole lease duration, on our clock", () => {
  const seen = { resourceVersion: "7", at: 50_000 };
  assert.deepEqual(planLeaseStep(lease("a", 15), "b", seen, 50_000 + 14_999, DEFAULT_MS), { action: "follow", holder: "a" });
  assert.deepEqual(planLeaseStep(lease("a", 15), "b", seen, 50_000 + 15_000, DEFAULT_MS), { action: "take-over", reason: "expired" });
  // The Lease's own duration counts; without one, the default.
  assert.deepEqual(planLeaseStep(lease("a", 3), "b", seen, 53_000, DEFAULT_MS), { action: "take-over", reason: "expired" });
  assert.deepEqual(planLeaseStep(lease("a", undefined), "b", seen, 60_000, DEFAULT_MS), { action: "follow", holder: "a" });
  assert.deepEqual(planLeaseStep(lease("a", 0), "b", seen, 65_000, DEFAULT_MS), { action: "take-over", reason: "expired" });
});

test("a renewal (new resourceVersion) restarts the observation clock; the same version keeps it", () => {
  const first = observeLease(undefined, "7", 1000);
  assert.deepEqual(first, { resourceVersion: "7", at: 1000 });
  assert.equal(observeLease(first, "7", 9000), first);
  assert.deepEqual(observeLease(first, "8", 9000), { resourceVersion: "8", at: 9000 });
  // So a holder renewing every 5 s is never taken over, however long it holds the Lease.
  let seen: LeaseObservation = first;
  for (let t = 1000, rv = 7; t < 100_000; t += 5000, rv++) {
    seen = observeLease(seen, String(rv), t);
    assert.equal(planLeaseStep(lease("a", 15, String(rv)), "b", seen, t, DEFAULT_MS).action, "follow");
  }
});

test("timings that would let two leaders act at once are refused", () => {
  const kube = new KubeClient({ server: "https://127.0.0.1:1", insecureSkipTlsVerify: false, namespace: "default", origin: "test" });
  const base = { kube, namespace: "ns", name: "l", identity: "a", logger: pino({ level: "silent" }) };
  assert.throws(() => new LeaderElector({ ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }), {
    name: "KubeError",
    code: "invalid-lease-timing",
    message: /lease duration > renew deadline > retry period/,
  });
  assert.throws(() => new LeaderElector({ ...base, leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 10_000 }), {
    name: "KubeError",
    code: "invalid-lease-timing",
    message: /renew deadline > retry period/,
  });
  const elector = new LeaderElector({ ...base, leaseDurationMs: 3000 });
  assert.equal(elector.isLeader(), false);
  assert.equal(elector.identity, "a");
});

test("Lease times are written as MicroTime: RFC 3339 with six fractional digits", () => {
  assert.equal(microTime(Date.UTC(2026, 10, 30, 10, 0, 0, 123)), "2026-11-30T10:00:00.123000Z");
  assert.equal(microTime(Date.UTC(2026, 0, 1)), "2026-01-01T00:00:00.000000Z");
});

test("a candidate's identity: the pod's name, else the hostname with a suffix of this process's, so two processes on one host never share one", async () => {
  const { defaultCandidateIdentity } = await import("../../src/kube/leader-election.ts");
  const { hostname } = await import("node:os");
  const { execFileSync } = await import("node:child_process");
  const saved = process.env.POD_NAME;
  try {
    process.env.POD_NAME = "imprimatur-7d9f-abcde";
    assert.equal(defaultCandidateIdentity(), "imprimatur-7d9f-abcde");
    delete process.env.POD_NAME;
    const mine = defaultCandidateIdentity();
    assert.match(mine, new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}_[0-9a-f]{8}$`));
    assert.equal(defaultCandidateIdentity(), mine, "stable for the life of the process");
    const module = new URL("../../src/kube/leader-election.ts", import.meta.url).href;
    const env = { ...process.env };
    delete env.POD_NAME;
    const another = execFileSync(
      process.execPath,
      ["--input-type=module", "-e", `import { defaultCandidateIdentity } from ${JSON.stringify(module)}; process.stdout.write(defaultCandidateIdentity());`],
      {
        env,
        encoding: "utf8",
      },
    );
    assert.notEqual(another, mine, "another process on this host is another candidate");
  } finally {
    if (saved === undefined) delete process.env.POD_NAME;
    else process.env.POD_NAME = saved;
  }
});
