// Past its limit of reviews being judged, or for a request read only after its deadline, the server answers at
// once with the failure policy's result and the reason, instead of judging late: denied failing closed; admitted
// failing open with the fail-open trace (warning, annotation, audit record). A review is held in judging by a pin
// whose registry accepts connections and never answers (what a stalled registry looks like), until its deadline.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import type { ClientRequest } from "node:http";
import { request } from "node:https";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DEFAULT_SERVER_CONFIG, type ServerConfig } from "../../../src/config/server-config.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { podReview } from "../../support/admission.ts";
import { getText, postJson } from "../../support/https-client.ts";
import { startTestApp, type TestApp } from "../../support/in-process-app.ts";

const dirs: string[] = [];
const sockets = new Set<Socket>();
// Accepts and never answers: a TLS handshake with it waits until the review's deadline.
const stalled = createServer((socket) => {
  sockets.add(socket);
  socket.on("close", () => sockets.delete(socket));
});
await new Promise<void>((resolve) => stalled.listen(0, "127.0.0.1", resolve));
const STALLED = `127.0.0.1:${(stalled.address() as AddressInfo).port}`;
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => stalled.close(resolve));
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function app(config: Partial<ServerConfig>): Promise<TestApp> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-overload-"));
  dirs.push(dir);
  await writeFile(
    join(dir, "pin.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pin}
spec:
  rules:
    - {action: allow, images: ["${STALLED}/*"], digestMutate: true}
    - {action: allow, images: ["registry.example.com/*"]}
  default: deny
`,
  );
  return startTestApp({
    policies: join(dir, "pin.yaml"),
    config: { ...DEFAULT_SERVER_CONFIG, ...config },
    registries: registrySettingsMap([{ host: STALLED, allowLocalAddresses: true }]),
  });
}

/** A pod review whose pin waits on the stalled registry for `timeout`, on /mutate. */
function stalledPin(t: TestApp, timeout: string): Promise<{ body: any }> {
  return postJson(`${t.base}/mutate?timeout=${timeout}`, t.ca, podReview({ images: [`${STALLED}/app:1`] }));
}

async function metric(t: TestApp, name: string): Promise<string[]> {
  const text = (await getText(`${t.base}/metrics`, t.ca)).text;
  return text.split("\n").filter((l) => l.startsWith(name));
}

const ALLOWED = podReview({ images: ["registry.example.com/app:1.0"] });

test("failing closed: a review past the limit being judged is denied at once with the reason; the one judged goes on", async () => {
  const t = await app({ maxReviewsInFlight: 1 });
  try {
    const held = stalledPin(t, "3s");
    await sleep(300); // the pin is waiting on the registry
    const started = Date.now();
    const shed = await postJson(`${t.base}/validate`, t.ca, ALLOWED);
    assert.ok(Date.now() - started < 2_000, "answered at once, not after the review in flight");
    assert.equal(shed.status, 200);
    assert.equal(shed.body.response.uid, ALLOWED.request.uid);
    assert.equal(shed.body.response.allowed, false);
    assert.match(
      shed.body.response.status.message,
      /the server is overloaded: 1 reviews in flight, the limit is 1; not judged, and denied because the server fails closed/,
    );
    const pinned = await held;
    assert.equal(pinned.body.response.allowed, false, "the pin itself fails at its deadline, failing closed");
    assert.doesNotMatch(pinned.body.response.status.message, /overloaded/);
    // With nothing in flight again, the next review is judged.
    assert.equal((await postJson(`${t.base}/validate`, t.ca, ALLOWED)).body.response.allowed, true);
    assert.deepEqual(await metric(t, "imprimatur_reviews_shed_total"), ['imprimatur_reviews_shed_total{endpoint="validate"} 1']);
  } finally {
    await t.close();
  }
});

test("failing open: a review past the limit is admitted unjudged with a warning, the fail-open annotation and an audit record", async () => {
  const t = await app({ failOpen: true, maxReviewsInFlight: 1 });
  try {
    const held = stalledPin(t, "3s");
    await sleep(300);
    // A pod the policy denies (another registry): admitted, unjudged, because the server fails open.
    const other = podReview({ images: ["docker.io/library/nginx:1.25"] });
    const shed = await postJson(`${t.base}/validate`, t.ca, other);
    assert.equal(shed.body.response.allowed, true);
    assert.match(shed.body.response.warnings.join("\n"), /admitted without being judged: the server is overloaded: 1 reviews in flight.*the server fails open/);
    assert.equal(shed.body.response.auditAnnotations["fail-open"], "true");
    await held;
    const records = (await readFile(join(t.stateDir, "audit.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; uid: string; backends: unknown });
    const overload = records.filter((r) => r.uid === other.request.uid);
    assert.equal(overload.length, 1);
    assert.equal(overload[0]!.event, "fail-open");
    assert.deepEqual(overload[0]!.backends, [{ backend: "imprimatur/overload", error: "the server is overloaded: 1 reviews in flight, the limit is 1" }]);
    // The judged one now: denied by the policy.
    assert.equal((await postJson(`${t.base}/validate`, t.ca, other)).body.response.allowed, false);
  } finally {
    await t.close();
  }
});

/** Starts a request whose body's end arrives only when `finish` is called. */
function heldBody(t: TestApp, path: string, body: string): { finish(): void; answer: Promise<any> } {
  let req!: ClientRequest;
  const answer = new Promise((resolve, reject) => {
    req = request(
      `${t.base}${path}`,
      { method: "POST", ca: t.ca, agent: false, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
      },
    );
    req.on("error", reject);
    req.write(body.slice(0, 10));
  });
  return { finish: () => req.end(body.slice(10)), answer };
}

test("a request read only after its deadline is answered at once with the failure policy's result; a slow body holds no place", async () => {
  const t = await app({ maxReviewsInFlight: 1 });
  try {
    // ?timeout=1s: the deadline is 700 ms after arrival; the body's end comes a second later.
    const late = heldBody(t, "/validate?timeout=1s", JSON.stringify(ALLOWED));
    const imageReview = {
      apiVersion: "imagepolicy.k8s.io/v1alpha1",
      kind: "ImageReview",
      spec: { containers: [{ image: "registry.example.com/app:1.0" }], namespace: "default" },
    };
    const lateImage = heldBody(t, "/imagereview?timeout=1s", JSON.stringify(imageReview));
    await sleep(300);
    // Two bodies still arriving take no place among the reviews judged (the limit is 1).
    assert.equal((await postJson(`${t.base}/validate`, t.ca, ALLOWED)).body.response.allowed, true);
    await sleep(700);
    late.finish();
    lateImage.finish();
    const answer = await late.answer;
    assert.equal(answer.response.allowed, false);
    assert.match(answer.response.status.message, /the server is overloaded: the request was read after its deadline \(1000 ms\); not judged/);
    const imageAnswer = await lateImage.answer;
    assert.equal(imageAnswer.status.allowed, false);
    assert.match(imageAnswer.status.reason, /read after its deadline/);
  } finally {
    await t.close();
  }
});
