// The status writer's limit on writes in flight. A real kube-apiserver answers too fast to show how many
// PATCHes arrive at once, so this test stands in for it with a loopback HTTP server that holds each request
// for a moment and counts those open together; what is written is checked on the real apiserver in
// test/e2e/policy-crds.test.ts.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { PolicyStatusWriter } from "../../../src/policy-resources/status-writer.ts";
import type { PolicyResourceObject } from "../../../src/policy-resources/resource-documents.ts";

test("a first load of many policies sends at most four status writes at once, and writes every one", async (t) => {
  let open = 0;
  let mostOpen = 0;
  const patched: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    open++;
    mostOpen = Math.max(mostOpen, open);
    req.resume();
    req.on("end", () => {
      if (req.method === "PATCH") patched.push(req.url ?? "");
      setTimeout(() => {
        open--;
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      }, 20);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });

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
  assert.ok(mostOpen <= 4, `at most four writes in flight, saw ${mostOpen}`);
  assert.ok(mostOpen >= 2, `writes still run side by side, saw ${mostOpen}`);
  assert.ok(
    patched.every((u) => u.startsWith("/apis/imprimatur.dev/v1alpha1/imagepolicies/policy-") && u.endsWith("/status")),
    patched.join("\n"),
  );
});
