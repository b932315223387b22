// Two replicas of `serve --background-scan` and the Lease that picks the scanning one, on a real etcd +
// kube-apiserver. The leader loses the API (holding-api-proxy.ts cuts every connection of its own, which the
// apiserver cannot be told to do for one client): it steps down when its renewal deadline passes, before the
// other replica can take the Lease (it waits for the Lease to expire), so the two never scan at once; the other
// takes over within the Lease's duration plus a retry; back, the old leader follows.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startHoldingApiProxy, type HoldingApiProxy } from "../support/holding-api-proxy.ts";
import { EMBEDDED_POLICIES } from "../../src/cli/args.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { teardown } from "../support/teardown.ts";

interface Replica {
  name: string;
  proxy: HoldingApiProxy;
  server: ImprimaturProcess;
}

let cluster: KubeCluster;
let dir: string;
const replicas: Replica[] = [];

/** The replica's log lines about the Lease: [time, message]. */
async function leaseLines(r: Replica): Promise<Array<{ time: number; msg: string }>> {
  return (await r.server.log())
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { time: number; msg: string; lease?: string })
    .filter((l) => l.msg.startsWith("leader election:") && l.lease?.endsWith("handover-scan") !== false);
}

async function until<T>(what: string, check: () => Promise<T | undefined>, seconds: number): Promise<T> {
  for (let i = 0; ; i++) {
    const found = await check();
    if (found !== undefined) return found;
    if (i > seconds * 5) {
      const logs = await Promise.all(replicas.map(async (r) => `${r.name}:\n${(await r.server.log()).slice(-3000)}`));
      throw new Error(`${what} did not happen within ${seconds} s;\n${logs.join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function lastLine(r: Replica, msg: string, after = 0): Promise<number | undefined> {
  return (await leaseLines(r)).filter((l) => l.msg === msg && l.time >= after).at(-1)?.time;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-handover-"));
  cluster = await startKubeCluster({});
  const kubeconfig = parse(await readFile(cluster.kubeconfig, "utf8")) as { clusters: Array<{ cluster: Record<string, unknown> }> };
  const caPem = Buffer.from(String(kubeconfig.clusters[0]!.cluster["certificate-authority-data"]), "base64").toString("utf8");
  for (const name of ["a", "b"]) {
    // Each replica reaches the apiserver through a proxy of its own, so one can lose it alone.
    const proxy = await startHoldingApiProxy({ upstream: cluster.url, caPem });
    const own = structuredClone(kubeconfig);
    for (const c of own.clusters) c.cluster = { server: proxy.url, "insecure-skip-tls-verify": true };
    await writeFile(join(dir, `${name}.kubeconfig`), stringify(own));
    const server = await startImprimatur([
      "--policies",
      EMBEDDED_POLICIES,
      "--kubeconfig",
      join(dir, `${name}.kubeconfig`),
      "--background-scan",
      "--scan-reports",
      "none",
      "--scan-lease",
      "default/handover-scan",
    ]);
    replicas.push({ name, proxy, server });
  }
});

after(() =>
  teardown([
    ...replicas.map((r) => () => r.server.stop()),
    ...replicas.map((r) => () => r.proxy.stop()),
    () => cluster?.stop(),
    () => (dir ? rm(dir, { recursive: true, force: true }) : undefined),
  ]),
);

test("the scanning leader loses the API: it steps down before the other takes over, within the Lease's time; back, it follows", async () => {
  const leader = await until(
    "a leader",
    async () => {
      for (const r of replicas) if ((await lastLine(r, "leader election: leading")) !== undefined) return r;
      return undefined;
    },
    60,
  );
  const other = replicas.find((r) => r !== leader)!;
  assert.equal(await lastLine(other, "leader election: leading"), undefined, "one leader at a time");
  const cutAt = Date.now();
  leader.proxy.cut();
  const steppedDown = await until("the cut leader stepping down", () => lastLine(leader, "leader election: not leading", cutAt), 30);
  const tookOver = await until("the other replica taking over", () => lastLine(other, "leader election: leading", cutAt), 45);
  assert.ok(steppedDown < tookOver, `the old leader stepped down (${steppedDown}) before the new one led (${tookOver}): never two at once`);
  // The documented bounds: a leader that cannot renew stops within its renewal deadline (10 s) and a retry (5 s);
  // the other takes over once the Lease has expired (15 s after the last renewal) and a retry.
  assert.ok(steppedDown - cutAt <= 16_000, `stepped down ${steppedDown - cutAt} ms after the cut`);
  assert.ok(tookOver - cutAt <= 26_000, `taken over ${tookOver - cutAt} ms after the cut`);
  assert.match((await leaseLines(leader)).map((l) => l.msg).join("\n"), /renewal deadline passed, stepping down|cannot read or write the Lease/);
  leader.proxy.restore();
  // Back, the old leader finds the Lease held and renewed by the other: it follows, and the other keeps leading.
  const restoredAt = Date.now();
  await new Promise((r) => setTimeout(r, 12_000));
  assert.equal(await lastLine(leader, "leader election: leading", restoredAt), undefined, "the old leader does not lead again while the other renews");
  assert.equal(await lastLine(other, "leader election: not leading", tookOver + 1), undefined, "the new leader keeps the Lease");
});
