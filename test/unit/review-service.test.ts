// The review service with a real WebhookBackend over HTTPS: retries, failure policy, cache, combination.
import { test, before, after } from "node:test";
import { tempFolder } from "../support/temp-folders.ts";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ImageReviewService } from "../../src/backends/review-service.ts";
import { DecisionCache } from "../../src/backends/decision-cache.ts";
import { WebhookBackend } from "../../src/backends/webhook-backend.ts";
import { allow, deny } from "../../src/core/decision.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { backendKubeconfig } from "../support/backend-kubeconfig.ts";

// Scripted answers, consumed in order; each is [status, body] or "hang".
let script: Array<[number, string] | "hang"> = [];
let calls = 0;
let server: Server;
let kubeconfig: string;

before(async () => {
  const ca = await createCertificateAuthority("t");
  const cert = await issueCertificate(ca, { commonName: "s", ipAddresses: ["127.0.0.1"] });
  server = createServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
    req.resume();
    req.on("end", () => {
      calls++;
      const step = script.shift() ?? [200, JSON.stringify({ status: { allowed: true } })];
      if (step === "hang") return; // never answers
      res.writeHead(step[0], { "content-type": "application/json" }).end(step[1]);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const dir = await tempFolder("imprimatur-rs-");
  await writeFile(join(dir, "ca.crt"), ca.certPem);
  kubeconfig = join(dir, "kubeconfig");
  await writeFile(kubeconfig, backendKubeconfig({ server: `https://127.0.0.1:${(server.address() as AddressInfo).port}/review`, caFile: "ca.crt" }));
});

after(() => {
  server.closeAllConnections();
  server.close();
});

const spec = (image: string) => ({ containers: [{ image }], annotations: {}, namespace: "ns" });

async function service(failOpen: boolean, timeoutMs = 2000) {
  const remote = await WebhookBackend.fromConfig({ name: "scan", kubeconfig, timeoutMs });
  return new ImageReviewService({ builtin: () => allow(), remotes: [remote], cache: new DecisionCache(), failOpen, retryBackoffMs: 20 });
}

test("5xx answers are retried with backoff until one succeeds", async () => {
  script = [
    [503, "busy"],
    [500, "oops"],
    [200, JSON.stringify({ status: { allowed: false, reason: "CVE-1" } })],
  ];
  calls = 0;
  const d = await (await service(false)).review({ spec: spec("a:1") }, Date.now() + 5000);
  assert.equal(calls, 3);
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.message, "CVE-1");
  assert.equal(d.violations[0]?.policy, "backend/scan");
});

test("a malformed answer is not an answer: failure policy applies, without retrying", async () => {
  script = [[200, '{"status": {}}']];
  calls = 0;
  const d = await (await service(false)).review({ spec: spec("b:1") }, Date.now() + 5000);
  assert.equal(calls, 1);
  assert.equal(d.allowed, false);
  assert.match(d.violations[0]!.message, /no status\.allowed boolean.*fails closed/);
});

test("a 400 or a malformed body is an answer: not retried, and named as one (not as a backend that could not be reached)", async () => {
  const cases: Array<[[number, string], string]> = [
    [[400, "spec.containers: required\n(more detail)"], "answered with an error: HTTP 400: spec.containers: required"],
    [[200, "<html>maintenance</html>"], "answered with an error: the answer is not JSON"],
    [[200, '{"status": {}}'], "answered with an error: the answer has no status.allowed boolean"],
  ];
  for (const [answer, said] of cases) {
    script = [answer];
    calls = 0;
    const closed = await (await service(false)).review({ spec: spec(`e:${answer[0]}`) }, Date.now() + 5000);
    assert.equal(calls, 1, "one attempt");
    assert.equal(closed.violations[0]?.message, `image policy backend ${said}; denying because the server fails closed`);
    assert.match(closed.auditAnnotations["backend.scan"]!, /^answered with an error; denied by fail-closed: /);
    script = [answer];
    const open = await (await service(true)).review({ spec: spec(`f:${answer[0]}`) }, Date.now() + 5000);
    assert.deepEqual(open.warnings, [`image policy backend scan ${said}; admitted because the server fails open`]);
  }
});

test("a backend that cannot be reached is tried 4 times in all, then named as not reached", async () => {
  const refusing = createServer();
  await new Promise<void>((r) => refusing.listen(0, "127.0.0.1", () => r()));
  const port = (refusing.address() as AddressInfo).port;
  await new Promise<void>((r) => refusing.close(() => r()));
  const dir = await tempFolder("imprimatur-rs-");
  const unreachable = join(dir, "kubeconfig");
  await writeFile(unreachable, backendKubeconfig({ server: `https://127.0.0.1:${port}/review`, insecure: true }));
  const remote = await WebhookBackend.fromConfig({ name: "scan", kubeconfig: unreachable, timeoutMs: 2000 });
  let attempts = 0;
  const counted = { name: remote.name, review: (...args: Parameters<typeof remote.review>) => (attempts++, remote.review(...args)) };
  const svc = new ImageReviewService({ builtin: () => allow(), remotes: [counted], cache: new DecisionCache(), failOpen: false, retryBackoffMs: 5 });
  const d = await svc.review({ spec: spec("g:1") }, Date.now() + 5000);
  assert.equal(attempts, 4);
  assert.equal(d.violations[0]?.message, "image policy backend could not be reached (ECONNREFUSED); denying because the server fails closed");
  await remote.close();
});

test("a hanging backend is bounded by the deadline; fail-open admits, marks and does not cache", async () => {
  script = ["hang", "hang", "hang", "hang"];
  calls = 0;
  const svc = await service(true, 10_000);
  const started = Date.now();
  const d = await svc.review({ spec: spec("c:1") }, Date.now() + 400);
  const took = Date.now() - started;
  assert.ok(took < 2000, `answered after ${took} ms, past the deadline`);
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations["fail-open"], "true");
  assert.equal(d.failOpen?.[0]?.backend, "scan");
  script = [];
  const again = await svc.review({ spec: spec("c:1") }, Date.now() + 2000);
  assert.equal(again.failOpen, undefined, "the failure was not cached; the backend was asked again");
});

test("every backend must allow: a built-in denial wins over a remote allow, and remote answers are cached", async () => {
  script = [];
  calls = 0;
  const remote = await WebhookBackend.fromConfig({ name: "scan", kubeconfig, timeoutMs: 2000 });
  const svc = new ImageReviewService({
    builtin: () => deny([{ policy: "p", rule: "default", message: "no" }]),
    remotes: [remote],
    cache: new DecisionCache(),
    failOpen: false,
  });
  const d1 = await svc.review({ spec: spec("d:1") }, Date.now() + 2000);
  const d2 = await svc.review({ spec: spec("d:1") }, Date.now() + 2000);
  assert.equal(d1.allowed, false);
  assert.equal(d2.allowed, false);
  assert.equal(calls, 1, "second review answered by the cache");
});

test("a backend answering 5xx on every attempt: 4 attempts, then the failure policy, naming the last answer", async () => {
  script = [
    [500, "oops"],
    [503, "busy"],
    [502, "bad gateway"],
    [500, "still oops"],
  ];
  calls = 0;
  const closed = await (await service(false)).review({ spec: spec("h:1") }, Date.now() + 5000);
  assert.equal(calls, 4);
  assert.equal(closed.allowed, false);
  assert.match(closed.violations[0]!.message, /^image policy backend .*500.*; denying because the server fails closed$/);
  script = Array.from({ length: 4 }, () => [500, "oops"] as [number, string]);
  calls = 0;
  const open = await (await service(true)).review({ spec: spec("h:2") }, Date.now() + 5000);
  assert.equal(calls, 4);
  assert.equal(open.allowed, true);
  assert.equal(open.auditAnnotations["fail-open"], "true");
  assert.equal(open.failOpen?.[0]?.backend, "scan");
});

test("a hanging backend failing closed: denied at the deadline, with the reason", async () => {
  script = ["hang", "hang", "hang", "hang"];
  const started = Date.now();
  const d = await (await service(false, 10_000)).review({ spec: spec("i:1") }, Date.now() + 400);
  assert.ok(Date.now() - started < 2000, "answered by the deadline");
  assert.equal(d.allowed, false);
  assert.match(d.violations[0]!.message, /^image policy backend .*; denying because the server fails closed$/);
  script = [];
});

test("a backend whose certificate the kubeconfig's CA does not trust: never trusted, named as not reached, the failure policy decides", async () => {
  const dir = await tempFolder("imprimatur-rs-");
  const other = await createCertificateAuthority("another CA");
  await writeFile(join(dir, "other-ca.crt"), other.certPem);
  const untrusted = join(dir, "kubeconfig");
  await writeFile(untrusted, backendKubeconfig({ server: `https://127.0.0.1:${(server.address() as AddressInfo).port}/review`, caFile: "other-ca.crt" }));
  const remote = await WebhookBackend.fromConfig({ name: "scan", kubeconfig: untrusted, timeoutMs: 2000 });
  calls = 0;
  const svc = (failOpen: boolean) =>
    new ImageReviewService({ builtin: () => allow(), remotes: [remote], cache: new DecisionCache(), failOpen, retryBackoffMs: 5 });
  const closed = await svc(false).review({ spec: spec("j:1") }, Date.now() + 5000);
  assert.equal(calls, 0, "no request reached the backend over an untrusted connection");
  assert.equal(closed.allowed, false);
  assert.match(closed.violations[0]!.message, /^image policy backend could not be reached \(.*\); denying because the server fails closed$/);
  const open = await svc(true).review({ spec: spec("j:2") }, Date.now() + 5000);
  assert.equal(open.allowed, true);
  assert.equal(open.auditAnnotations["fail-open"], "true");
  await remote.close();
});
