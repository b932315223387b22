// NamespaceLabelCache against a real kube-apiserver + etcd: the initial list, watch events, GETs on a
// cache miss, and recovery after the connection to the API is cut (through a proxy the test controls).
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import type { Logger } from "pino";
import { loadKubeClient } from "../../src/kube/kube-connection.ts";
import { NamespaceLabelCache } from "../../src/kube/namespace-label-cache.ts";
import { startKubeCluster } from "../support/kube-cluster.ts";
import type { ClusterOptions, KubeCluster } from "../support/kube-cluster.ts";
import { teardown } from "../support/teardown.ts";

const NAME_LABEL = "kubernetes.io/metadata.name";
const WAIT_MS = 30_000;

/** A pino logger whose records the test can read. */
function capturingLogger(): { logger: Logger; records: { level: number; msg: string; [key: string]: unknown }[] } {
  const records: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString("utf8").split("\n")) if (line) records.push(JSON.parse(line) as { level: number; msg: string });
      callback();
    },
  });
  return { logger: pino({ level: "debug" }, sink), records };
}

/** Polls `probe` until it returns something other than undefined; fails, describing the last state, at the deadline. */
async function waitFor<T>(what: string, probe: () => T | undefined, describeState: () => unknown = () => undefined): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${WAIT_MS} ms waiting for ${what}; state: ${JSON.stringify(describeState())}`);
    await sleep(50);
  }
}

async function waitForAsync<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${WAIT_MS} ms waiting for ${what}`);
    await sleep(250);
  }
}

/**
 * A TCP proxy on 127.0.0.1 in front of the apiserver. TLS passes through untouched (the apiserver's
 * certificate covers 127.0.0.1, whatever the port). cut() drops every connection and stops listening, so
 * new ones are refused until open() again; stall() accepts connections but never forwards them.
 */
class CuttableProxy {
  readonly sockets = new Set<Socket>();
  connections = 0;
  port = 0;
  private stalled = false;
  private server: Server | undefined;
  private readonly targetPort: number;

  constructor(targetPort: number) {
    this.targetPort = targetPort;
  }

  async open(): Promise<void> {
    const server = createServer((client) => {
      this.connections++;
      this.track(client);
      if (this.stalled) {
        client.resume(); // read and drop, so a close by the client is noticed
        return;
      }
      const upstream = connect(this.targetPort, "127.0.0.1");
      this.track(upstream);
      client.pipe(upstream).pipe(client);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  stall(): void {
    this.stalled = true;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
  }
}

/** One cluster for a describe block, with the caches and proxies its tests made, all stopped in after(). */
class Fixture {
  cluster!: KubeCluster;
  private readonly caches: NamespaceLabelCache[] = [];
  private readonly proxies: CuttableProxy[] = [];

  constructor(options: ClusterOptions = {}) {
    before(async () => {
      this.cluster = await startKubeCluster(options);
    });
    after(() => teardown([...this.caches.map((c) => () => c.close()), ...this.proxies.map((p) => () => p.cut()), () => this.cluster?.stop()]));
  }

  async kubectl(...args: string[]): Promise<string> {
    const result = await this.cluster.kubectl(args);
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} failed: ${result.stderr}`);
    return result.stdout;
  }

  async createNamespace(name: string, labels: Record<string, string>): Promise<void> {
    const yaml = JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } });
    const applied = await this.cluster.apply(yaml);
    assert.equal(applied.code, 0, `creating namespace ${name} failed: ${applied.stderr}`);
  }

  /**
   * Deletes a namespace for good. Without a controller-manager nothing runs the "kubernetes" finalizer,
   * so a deleted namespace stays Terminating; emptying spec.finalizers does the namespace controller's part.
   */
  async deleteNamespace(name: string): Promise<void> {
    await this.kubectl("delete", "namespace", name, "--wait=false");
    await this.finalizeNamespace(name);
  }

  async finalizeNamespace(name: string): Promise<void> {
    const ns = JSON.parse(await this.kubectl("get", "namespace", name, "-o", "json")) as { spec: { finalizers?: string[] } };
    ns.spec.finalizers = [];
    const finalized = await this.cluster.kubectl(["replace", "--raw", `/api/v1/namespaces/${name}/finalize`, "-f", "-"], {
      input: JSON.stringify(ns),
    });
    assert.equal(finalized.code, 0, `finalize failed: ${finalized.stderr}`);
    const gone = await this.cluster.kubectl(["get", "namespace", name]);
    assert.match(gone.stderr, /NotFound/, `namespace ${name} is gone after finalizing`);
  }

  newCache(kubeconfig: string, logger: Logger = pino({ level: "silent" }), startTimeoutMs?: number): NamespaceLabelCache {
    const cache = new NamespaceLabelCache(loadKubeClient(kubeconfig), { logger, ...(startTimeoutMs ? { startTimeoutMs } : {}) });
    this.caches.push(cache);
    return cache;
  }

  /** A proxy in front of the apiserver and a kubeconfig that goes through it. */
  async proxied(name: string): Promise<{ proxy: CuttableProxy; kubeconfig: string }> {
    const proxy = new CuttableProxy(Number(new URL(this.cluster.url).port));
    this.proxies.push(proxy);
    await proxy.open();
    const kubeconfig = join(this.cluster.dir, `${name}.kubeconfig`);
    const text = readFileSync(this.cluster.kubeconfig, "utf8");
    const server = JSON.stringify(this.cluster.url);
    assert.ok(text.includes(server), "the harness kubeconfig names the apiserver URL");
    writeFileSync(kubeconfig, text.replace(server, JSON.stringify(`https://127.0.0.1:${proxy.port}`)), { mode: 0o600 });
    return { proxy, kubeconfig };
  }
}

describe("namespace labels from the Kubernetes API", () => {
  const fx = new Fixture();

  test("start() lists namespaces, then add, relabel and delete arrive through the watch", async () => {
    await fx.createNamespace("e2e-listed", { team: "a" });
    const cache = fx.newCache(fx.cluster.kubeconfig);
    assert.equal(cache.ready(), false, "not ready before start()");
    await cache.start();
    assert.equal(cache.ready(), true);
    assert.equal(cache.synced, true);

    // From the initial list; the name label is added as Kubernetes ≥ 1.21 would.
    assert.deepEqual(cache.labels("e2e-listed"), { [NAME_LABEL]: "e2e-listed", team: "a" });
    assert.deepEqual(cache.labels("default"), { [NAME_LABEL]: "default" });

    await fx.createNamespace("e2e-watched", { team: "b" });
    await waitFor("the new namespace", () => cache.labels("e2e-watched"));
    assert.deepEqual(cache.labels("e2e-watched"), { [NAME_LABEL]: "e2e-watched", team: "b" });

    await fx.kubectl("label", "namespace", "e2e-watched", "team=c", "tier=gold", "--overwrite");
    await waitFor(
      "the relabel",
      () => (cache.labels("e2e-watched")?.team === "c" ? true : undefined),
      () => cache.labels("e2e-watched"),
    );
    assert.deepEqual(cache.labels("e2e-watched"), { [NAME_LABEL]: "e2e-watched", team: "c", tier: "gold" });

    await fx.kubectl("label", "namespace", "e2e-watched", "tier-");
    await waitFor("the label removal", () => (cache.labels("e2e-watched")?.tier === undefined ? true : undefined));
    assert.deepEqual(cache.labels("e2e-watched"), { [NAME_LABEL]: "e2e-watched", team: "c" });

    // Without a controller-manager nothing runs the "kubernetes" finalizer: a deleted namespace stays
    // Terminating, and it is still a namespace with labels (it can even be relabelled).
    await fx.kubectl("delete", "namespace", "e2e-watched", "--wait=false");
    const phase = await fx.kubectl("get", "namespace", "e2e-watched", "-o", "jsonpath={.status.phase}");
    assert.equal(phase, "Terminating");
    await fx.kubectl("label", "namespace", "e2e-watched", "team=d", "--overwrite");
    await waitFor("the relabel of a terminating namespace", () => (cache.labels("e2e-watched")?.team === "d" ? true : undefined));
    assert.deepEqual(cache.labels("e2e-watched"), { [NAME_LABEL]: "e2e-watched", team: "d" });

    await fx.finalizeNamespace("e2e-watched");
    await waitFor(
      "the deletion",
      () => (cache.labels("e2e-watched") === undefined ? true : undefined),
      () => cache.labels("e2e-watched"),
    );
    assert.deepEqual(cache.labels("e2e-listed"), { [NAME_LABEL]: "e2e-listed", team: "a" }, "other namespaces are untouched");

    await cache.close();
    assert.equal(cache.ready(), false, "not ready after close()");
  });

  test("prepare() reads a namespace the watch has not delivered, with one GET for concurrent callers", async () => {
    const { proxy, kubeconfig } = await fx.proxied("prepare");
    await fx.createNamespace("e2e-prepared", { team: "p" });
    const cache = fx.newCache(kubeconfig); // never started: only prepare() can fill it
    assert.equal(cache.labels("e2e-prepared"), undefined);

    const deadline = Date.now() + 10_000;
    await Promise.all(Array.from({ length: 5 }, () => cache.prepare("e2e-prepared", deadline)));
    assert.deepEqual(cache.labels("e2e-prepared"), { [NAME_LABEL]: "e2e-prepared", team: "p" });
    // The client opens a connection per request, so one connection means one GET.
    assert.equal(proxy.connections, 1, "five concurrent prepare() calls share one GET");

    await cache.prepare("e2e-prepared", Date.now() + 10_000);
    assert.equal(proxy.connections, 1, "a hit needs no request");
    assert.equal(cache.ready(), false, "prepare() does not make an unstarted cache ready");
  });

  test("an unknown namespace: labels() is undefined, prepare() resolves, and it is found once created", async () => {
    const cache = fx.newCache(fx.cluster.kubeconfig);
    await cache.start();
    assert.equal(cache.labels("e2e-late"), undefined);
    await cache.prepare("e2e-late", Date.now() + 5_000); // a 404: resolves, no throw
    assert.equal(cache.labels("e2e-late"), undefined);
    await cache.prepare("e2e-late", Date.now() - 1); // deadline already passed
    assert.equal(cache.labels("e2e-late"), undefined);

    // The 404 is not remembered for long: an unstarted cache (GET only) finds the namespace soon after.
    const getOnly = fx.newCache(fx.cluster.kubeconfig);
    await getOnly.prepare("e2e-late", Date.now() + 5_000);
    assert.equal(getOnly.labels("e2e-late"), undefined);
    await fx.createNamespace("e2e-late", { team: "l" });
    await waitFor("prepare() to find the new namespace", () => getOnly.labels("e2e-late") ?? void getOnly.prepare("e2e-late", Date.now() + 5_000));
    assert.deepEqual(getOnly.labels("e2e-late"), { [NAME_LABEL]: "e2e-late", team: "l" });
    await waitFor("the watch to deliver it too", () => cache.labels("e2e-late"));
  });

  test("prepare() gives up at its deadline when the API does not answer, and never rejects", async () => {
    const { proxy, kubeconfig } = await fx.proxied("stalled");
    proxy.stall();
    const cache = fx.newCache(kubeconfig);
    const startedAt = Date.now();
    await cache.prepare("e2e-listed", startedAt + 500);
    const elapsed = Date.now() - startedAt;
    assert.ok(elapsed >= 450 && elapsed < 3_000, `prepare() returned after ${elapsed} ms for a 500 ms deadline`);
    assert.equal(cache.labels("e2e-listed"), undefined);
    assert.equal(proxy.connections, 1);

    // close() does not wait for the abandoned GET. Its socket, still in the TLS handshake, cannot be
    // aborted (undici ignores aborts while connecting) and ends at undici's 10 s connect timeout.
    const waiting = cache.prepare("e2e-listed", Date.now() + 20_000);
    await sleep(100);
    const closeStartedAt = Date.now();
    await cache.close();
    await waiting;
    assert.ok(Date.now() - closeStartedAt < 1_000, "close() ends a pending prepare() and does not wait for a stalled connection");
    // The second GET waited on the pool's connection attempt (src/kube/kube-client.ts) rather than opening
    // one of its own, as client-go's requests share a connection.
    assert.equal(proxy.connections, 1);
    await waitFor(
      "the stalled connection to close",
      () => (proxy.sockets.size === 0 ? true : undefined),
      () => proxy.sockets.size,
    );
  });

  test("the watch restarts with backoff after the connection is cut, and catches up", async () => {
    const { proxy, kubeconfig } = await fx.proxied("flaky");
    const { logger, records } = capturingLogger();
    await fx.createNamespace("e2e-flaky", { stage: "one" });
    const cache = fx.newCache(kubeconfig, logger);
    await cache.start();
    assert.deepEqual(cache.labels("e2e-flaky"), { [NAME_LABEL]: "e2e-flaky", stage: "one" });

    await proxy.cut();
    // Changed directly, not through the proxy, while the cache cannot reach the API.
    await fx.kubectl("label", "namespace", "e2e-flaky", "stage=two", "--overwrite");
    await fx.createNamespace("e2e-during-outage", { stage: "new" });
    await waitFor("two failed restarts", () => (records.filter((r) => r.level === 40).length >= 2 ? true : undefined));
    assert.equal(cache.labels("e2e-flaky")?.stage, "one", "nothing arrives while the proxy is down");
    assert.equal(cache.labels("e2e-during-outage"), undefined);
    assert.equal(cache.ready(), true, "a stale cache stays ready");

    await proxy.open();
    await waitFor(
      "the change made during the outage",
      () => (cache.labels("e2e-flaky")?.stage === "two" ? true : undefined),
      () => cache.labels("e2e-flaky"),
    );
    assert.deepEqual(cache.labels("e2e-flaky"), { [NAME_LABEL]: "e2e-flaky", stage: "two" });
    assert.deepEqual(cache.labels("e2e-during-outage"), { [NAME_LABEL]: "e2e-during-outage", stage: "new" });

    const warnings = records.filter((r) => r.level === 40);
    assert.ok(
      warnings.every((r) => /restarting after backoff/.test(r.msg)),
      JSON.stringify(warnings),
    );
    const delays = warnings.map((r) => r.delayMs as number);
    assert.equal(delays[0], 200, "the first restart waits the minimum backoff");
    for (let i = 1; i < delays.length; i++) {
      assert.equal(delays[i], Math.min(10_000, delays[i - 1]! * 2), `backoff doubles up to the cap: ${delays.join(", ")}`);
    }

    // Still following changes after the recovery.
    await fx.kubectl("label", "namespace", "e2e-flaky", "stage=three", "--overwrite");
    await waitFor("a change after the recovery", () => (cache.labels("e2e-flaky")?.stage === "three" ? true : undefined));
  });

  test("start() rejects with a clear message when the API cannot be reached", async () => {
    const { proxy, kubeconfig } = await fx.proxied("unreachable");
    await proxy.cut(); // connections to it are refused
    const cache = fx.newCache(kubeconfig, pino({ level: "silent" }), 1_500);
    await assert.rejects(cache.start(), (err: Error) => {
      assert.equal(err.name, "KubeApiError");
      assert.equal((err as Error & { code?: string }).code, "unavailable", "refused connections: the API is unavailable");
      assert.match(err.message, /cannot list namespaces from the Kubernetes API at https:\/\/127\.0\.0\.1:\d+ within 1\.5 s/);
      assert.match(err.message, /last error: .*(ECONNREFUSED|fetch failed)/);
      return true;
    });
    assert.equal(cache.ready(), false);
  });

  test("loadKubeClient() reads a kubeconfig file, and says how to give one when there is none", async () => {
    const kc = loadKubeClient(fx.cluster.kubeconfig);
    assert.equal(kc.connection.server, fx.cluster.url);
    assert.throws(() => loadKubeClient(join(fx.cluster.dir, "missing.kubeconfig")), /kubeconfig .*missing\.kubeconfig: .*ENOENT/);

    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      assert.throws(() => loadKubeClient(), /give a kubeconfig file .*or run in a pod with a service account/);
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });
});

describe("namespace labels when the API server has forgotten the watch's resource version", () => {
  // No watch cache, and etcd compacted every second: a watch resumed after a few seconds away gets 410 Gone.
  const fx = new Fixture({ extraArgs: ["--watch-cache=false", "--etcd-compaction-interval=1s"] });

  test("after 410 Gone the cache lists again: changes, additions and deletions from the outage all arrive", async () => {
    const { proxy, kubeconfig } = await fx.proxied("expired");
    const { logger, records } = capturingLogger();
    await fx.createNamespace("e2e-kept", { version: "1" });
    await fx.createNamespace("e2e-doomed", { version: "1" });
    const cache = fx.newCache(kubeconfig, logger);
    await cache.start();
    assert.deepEqual(cache.labels("e2e-doomed"), { [NAME_LABEL]: "e2e-doomed", version: "1" });

    await proxy.cut();
    // (--raw: kubectl's own lists carry no resourceVersion.)
    const list = JSON.parse(await fx.kubectl("get", "--raw", "/api/v1/namespaces")) as { metadata: { resourceVersion: string } };
    const lastSeen = list.metadata.resourceVersion; // not older than anything the cache has seen
    assert.match(lastSeen, /^\d+$/);
    await fx.kubectl("label", "namespace", "e2e-kept", "version=2", "--overwrite");
    await fx.deleteNamespace("e2e-doomed");
    await fx.createNamespace("e2e-born", { version: "1" });

    // Wait until the server really answers a watch from that resource version with 410 Gone.
    const query = `/api/v1/namespaces?watch=1&timeoutSeconds=1&resourceVersion=${lastSeen}`;
    await waitForAsync("etcd to compact past the cache's resource version", async () => {
      const probe = await fx.cluster.kubectl(["get", "--raw", query]);
      return /"code":\s*410|\(Gone\)|too old resource version|compacted/i.test(probe.stdout + probe.stderr) ? true : undefined;
    });

    await proxy.open();
    await waitFor(
      "the relabel made during the outage",
      () => (cache.labels("e2e-kept")?.version === "2" ? true : undefined),
      () => cache.labels("e2e-kept"),
    );
    assert.equal(cache.labels("e2e-doomed"), undefined, "a namespace deleted during the outage is gone after the new list");
    assert.deepEqual(cache.labels("e2e-born"), { [NAME_LABEL]: "e2e-born", version: "1" });
    assert.ok(
      records.some((r) => r.level === 30 && /resource version expired; listing again/.test(r.msg)),
      `the 410 led to a new list: ${JSON.stringify(records.map((r) => r.msg))}`,
    );
  });
});
