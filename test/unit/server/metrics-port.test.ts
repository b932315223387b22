// `serve --metrics-port`: /metrics, /healthz and /readyz over plain HTTP, no credentials needed, while the HTTPS
// port requires them; /readyz says why the server is not ready (policies, certificate, draining).
import { test } from "node:test";
import assert from "node:assert/strict";
import { get } from "node:http";
import { pino } from "pino";
import { EMBEDDED_POLICIES } from "../../../src/cli/args.ts";
import { createMetrics, startMetricsServer } from "../../../src/server/metrics.ts";
import { parseCallerTokens, tokenDigest } from "../../../src/caller-auth/caller-tokens.ts";
import { getText } from "../../support/https-client.ts";
import { startTestApp } from "../../support/in-process-app.ts";
import { freePort } from "../../support/ports.ts";

function httpGet(url: string): Promise<{ status: number; text: string; type: string }> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), type: String(res.headers["content-type"]) }));
    }).on("error", reject);
  });
}

test("the metrics listener answers /readyz with what the server still waits for", async () => {
  let why: string | undefined = "the policies are not loaded yet";
  const server = await startMetricsServer({ host: "127.0.0.1", port: 0, metrics: createMetrics(), notReady: () => why });
  try {
    const base = `http://127.0.0.1:${server.port}`;
    assert.deepEqual(await httpGet(`${base}/readyz`).then((r) => [r.status, r.text]), [503, "the policies are not loaded yet"]);
    why = "the serving certificate is not in place yet";
    assert.deepEqual(await httpGet(`${base}/readyz`).then((r) => [r.status, r.text]), [503, "the serving certificate is not in place yet"]);
    why = undefined;
    assert.equal((await httpGet(`${base}/readyz`)).status, 200);
    assert.equal((await httpGet(`${base}/healthz`)).status, 200, "alive whatever readiness says");
    assert.equal((await httpGet(`${base}/validate`)).status, 404, "nothing that decides is served here");
  } finally {
    await server.close();
  }
});

test("with --metrics-port, Prometheus scrapes plain HTTP without credentials; the HTTPS port no longer serves /metrics", async () => {
  const metricsPort = await freePort();
  const token = "a-caller-token-of-some-length";
  const tokens = parseCallerTokens(
    `apiVersion: imprimatur.dev/v1alpha1\nkind: CallerTokens\ncallers:\n  - { name: a, cluster: a, tokenSha256: ${tokenDigest(token)} }\n`,
    "callers.yaml",
  );
  const app = await startTestApp({ policies: EMBEDDED_POLICIES, metricsPort, callers: { tokens }, logger: pino({ level: "silent" }) });
  try {
    assert.equal(app.app.metricsPort, metricsPort);
    const scraped = await httpGet(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(scraped.status, 200);
    assert.match(scraped.text, /imprimatur_decisions_total/);
    assert.match(scraped.type, /text\/plain/);
    assert.equal((await httpGet(`http://127.0.0.1:${metricsPort}/readyz`)).status, 200);
    assert.equal((await getText(`${app.base}/metrics`, app.ca)).status, 404);
    assert.equal((await getText(`${app.base}/readyz`, app.ca)).status, 200);

    // Draining: not ready on both ports at once.
    const closing = app.app.close(300);
    assert.deepEqual(await httpGet(`http://127.0.0.1:${metricsPort}/readyz`).then((r) => [r.status, r.text]), [503, "shutting down"]);
    await closing;
  } finally {
    await app.close();
  }
});

test("/readyz follows the certificate source: a served certificate that has expired unrenewed takes the replica out", async () => {
  // The certificate source as app.ts sees it (subscribe, notReady); the Secret-backed one needs a cluster, and
  // its own tests cover when it reports what.
  let why: string | undefined;
  const app = await startTestApp({ policies: EMBEDDED_POLICIES, tlsUpdates: { subscribe: () => () => undefined, notReady: () => why } });
  try {
    assert.equal((await getText(`${app.base}/readyz`, app.ca)).status, 200);
    why = "the serving certificate from Secret imprimatur/imprimatur-tls has expired";
    const res = await getText(`${app.base}/readyz`, app.ca);
    assert.deepEqual([res.status, res.text], [503, why]);
    assert.equal((await getText(`${app.base}/healthz`, app.ca)).status, 200, "alive all the same");
  } finally {
    await app.close();
  }
});
