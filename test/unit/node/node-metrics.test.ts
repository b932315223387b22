// The node proxy's Prometheus metrics (src/node/node-metrics.ts): names, labels, and the gauges read from the
// record store when scraped. How the proxy counts its decisions is in node-image-proxy.test.ts.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { credentialLessRecord } from "../../../src/core/pull-verification/pull-records.ts";
import { createNodeMetrics } from "../../../src/node/node-metrics.ts";
import { recordFileName, RecordStore } from "../../../src/node/record-store.ts";

const ID = (c: string) => `sha256:${c.repeat(64)}`;

test("the counters' names, help and labels as scraped", async () => {
  const metrics = createNodeMetrics(() => undefined);
  metrics.imageCheck("must-pull");
  metrics.pull("answered-from-records");
  metrics.reuseDenied();
  metrics.criCall("PullImage", "UNKNOWN");
  const text = await metrics.registry.metrics();
  for (const line of [
    "# HELP imprimatur_node_image_checks_total ImageStatus calls of the kubelet's pull decision, by how they were answered",
    "# TYPE imprimatur_node_image_checks_total counter",
    'imprimatur_node_image_checks_total{result="must-pull"} 1',
    "# HELP imprimatur_node_pulls_total PullImage calls, by outcome",
    'imprimatur_node_pulls_total{result="answered-from-records"} 1',
    "# HELP imprimatur_node_reuse_denied_total Pods refused an image already on the node because the registry refused their credentials",
    "imprimatur_node_reuse_denied_total 1",
    "# HELP imprimatur_node_cri_calls_total CRI image-service calls, by method and gRPC code",
    'imprimatur_node_cri_calls_total{method="PullImage",code="UNKNOWN"} 1',
    "# HELP imprimatur_node_pulled_records Pulled records in memory (each also on disk), by whether they could be read",
    "# TYPE imprimatur_node_pulled_records gauge",
    'imprimatur_node_pulled_records{state="readable"} 0',
    'imprimatur_node_pulled_records{state="unreadable"} 0',
    "# HELP imprimatur_node_pull_intents Pulls in flight (an intent written, the pull not finished)",
    "# TYPE imprimatur_node_pull_intents gauge",
    "imprimatur_node_pull_intents 0",
  ])
    assert.ok(text.split("\n").includes(line), `scraped: ${line}`);
});

test("the gauges follow the record store at each scrape", async () => {
  const dir = join(await mkdtemp(join(tmpdir(), "imprimatur-node-metrics-")), "state");
  try {
    await mkdir(join(dir, "pulled"), { recursive: true, mode: 0o700 });
    await writeFile(join(dir, "pulled", recordFileName(ID("a"))), "{not json");
    const store = await RecordStore.open(dir);
    await store.update(ID("b"), () => credentialLessRecord(ID("b"), new Date()));
    await store.update(ID("c"), () => credentialLessRecord(ID("c"), new Date()));
    const metrics = createNodeMetrics(() => store);
    const gauge = async (name: string, state?: string) =>
      (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => state === undefined || v.labels.state === state)?.value;
    assert.equal(await gauge("imprimatur_node_pulled_records", "readable"), 2);
    assert.equal(await gauge("imprimatur_node_pulled_records", "unreadable"), 1);
    assert.equal(await gauge("imprimatur_node_pull_intents"), 0);
    await store.writeIntent("registry.example.com/app:v1").durable;
    store.writeIntent("registry.example.com/app:v1");
    assert.equal(await gauge("imprimatur_node_pull_intents"), 2);
    await store.remove(ID("b"));
    assert.equal(await gauge("imprimatur_node_pulled_records", "readable"), 1);
  } finally {
    await rm(join(dir, ".."), { recursive: true, force: true });
  }
});
