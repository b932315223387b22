// The status writer's limit on writes in flight. A real kube-apiserver answers too fast to show how many
// PATCHes arrive at once, so this test stands in for it with a loopback HTTP server that holds each request
// for a moment and counts those open together; what is written is checked on the real apiserver in
// test/e2e/policy-crds.test.ts.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { KubeClient } from "../../../src/kube/kube-client.ts";
import { PolicyStatusWriter } from "../../../src/policy-resources/status-writer.ts";
import type { PolicyResourceObject } from "../../../src/policy-resources/resource-documents.ts";

/** A client of the stand-in server. */
function kubeconfigFor(server: Server): KubeClient {
  return new KubeClient({
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    insecureSkipTlsVerify: false,
    namespace: "default",
    origin: "test",
  });
}

test("a first load of many policies sends at most four status writes at once, and writes every one", async (t) => {
  let open = 0;
  let mostOpen = 0;
  const patched: string[] = [];
  const patchTypes = new Set<string | undefined>();
  const server = createServer((req: IncomingMessage, res) => {
    open++;
    mostOpen = Math.max(mostOpen, open);
    req.resume();
    req.on("end", () => {
      if (req.method === "PATCH") {
        patched.push(req.url ?? "");
        patchTypes.add(req.headers["content-type"]);
      }
      setTimeout(() => {
        open--;
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      }, 20);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const kube = kubeconfigFor(server);

  const objects = new Map<string, PolicyResourceObject>();
  for (let i = 0; i < 30; i++) {
    const name = `policy-${i}`;
    objects.set(name, { kind: "ImagePolicy", name, uid: `uid-${i}`, generation: 1, object: { metadata: { name, generation: 1 } } });
  }
  const writer = new PolicyStatusWriter(kube, { logger: pino({ level: "silent" }), latest: (_kind, name) => objects.get(name) });
  for (const o of objects.values()) writer.report(o, { state: "in-force", generation: 1 });
  await sleep(0);
  await writer.flush();

  assert.equal(patched.length, 30, "every policy's status is written");
  assert.deepEqual([...patchTypes], ["application/merge-patch+json"]);
  assert.ok(mostOpen <= 4, `at most four writes in flight, saw ${mostOpen}`);
  assert.ok(mostOpen >= 2, `writes still run side by side, saw ${mostOpen}`);
  assert.ok(
    patched.every((u) => u.startsWith("/apis/imprimatur.dev/v1alpha1/imagepolicies/policy-") && u.endsWith("/status")),
    patched.join("\n"),
  );
});

test("a status write that fails is tried again with a backoff until it is written, and stops once the object changes or the writer closes", async (t) => {
  // The same stand-in: it refuses the first PATCHes of each object with a 500, as an apiserver that is restarting.
  const attempts = new Map<string, number>();
  let refuseFirst = 2;
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on("end", () => {
      const url = req.url ?? "";
      const n = (attempts.get(url) ?? 0) + 1;
      attempts.set(url, n);
      if (req.method === "PATCH" && n <= refuseFirst)
        res.writeHead(500, { "content-type": "application/json" }).end('{"kind":"Status","message":"etcd leader changed"}');
      else res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const kube = kubeconfigFor(server);
  const objects = new Map<string, PolicyResourceObject>();
  const put = (name: string, generation: number) =>
    objects.set(name, { kind: "ImagePolicy", name, uid: `uid-${name}`, generation, object: { metadata: { name, generation } } });
  const statusUrl = (name: string) => `/apis/imprimatur.dev/v1alpha1/imagepolicies/${name}/status`;
  const writer = new PolicyStatusWriter(kube, {
    logger: pino({ level: "silent" }),
    latest: (_kind, name) => objects.get(name),
    retryMinMs: 20,
    retryMaxMs: 40,
  });
  t.after(() => writer.close());

  put("recovers", 1);
  writer.report(objects.get("recovers")!, { state: "in-force", generation: 1 });
  for (let i = 0; i < 200 && (attempts.get(statusUrl("recovers")) ?? 0) < 3; i++) await sleep(10);
  await writer.flush();
  assert.equal(attempts.get(statusUrl("recovers")), 3, "two refusals, then written");
  await sleep(150);
  assert.equal(attempts.get(statusUrl("recovers")), 3, "written: no more attempts");

  // A newer generation replaces the failed write's object: the old write is not retried.
  refuseFirst = 1_000;
  put("superseded", 1);
  writer.report(objects.get("superseded")!, { state: "in-force", generation: 1 });
  for (let i = 0; i < 100 && (attempts.get(statusUrl("superseded")) ?? 0) < 1; i++) await sleep(10);
  put("superseded", 2);
  await sleep(150);
  assert.equal(attempts.get(statusUrl("superseded")), 1, "the generation judged is gone: nothing to retry");

  // Closed: the pending retry is dropped.
  put("closed", 1);
  writer.report(objects.get("closed")!, { state: "in-force", generation: 1 });
  for (let i = 0; i < 100 && (attempts.get(statusUrl("closed")) ?? 0) < 1; i++) await sleep(10);
  await writer.flush();
  writer.close();
  await sleep(150);
  assert.equal(attempts.get(statusUrl("closed")), 1);
});
