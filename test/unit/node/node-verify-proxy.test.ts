// Verification at pull time in the node proxy's decisions (src/node/node-image-proxy.ts), in-process over the fake
// runtime (fake-image-service.ts, real CRI message bytes) and a real RecordStore. The judge here is scripted: what
// a verdict makes the proxy do is tested, not how it is reached (src/node/pull-gate.ts, test/unit/node/pull-gate.test.ts;
// both together against containerd and a kubelet in test/e2e/node-verify-*.test.ts).
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { decodeImageStatusResponse, decodePullImageResponse, encodePullImageRequest } from "../../../src/cri/cri-messages.ts";
import { createNodeMetrics, type NodeMetrics } from "../../../src/node/node-metrics.ts";
import { NodeImageProxy, type PullVerification, type VerifyPresent } from "../../../src/node/node-image-proxy.ts";
import type { PullRequest, PullVerdict } from "../../../src/node/pull-gate.ts";
import { RecordStore } from "../../../src/node/record-store.ts";
import { inProcessNodeProxy } from "../../support/in-process-node-proxy.ts";
import { imageStatusRequest, pullImageRequest } from "../../support/kubelet-cri.ts";
import { FakeImageService } from "./fake-image-service.ts";

const REPO = "registry.example.com/apps/web";
const TAG = `${REPO}:v1`;
const DIGEST = `sha256:${"d".repeat(64)}`;
const BY_DIGEST = `${REPO}@${DIGEST}`;
const IMAGE_ID = `sha256:${"1".repeat(64)}`;
const OLD_ID = `sha256:${"2".repeat(64)}`;

/** What the judge says next, and what it was asked. */
class ScriptedJudge {
  verdict: PullVerdict = {
    outcome: "verified",
    pullAs: BY_DIGEST,
    digest: DIGEST,
    decision: { allowed: true, violations: [], warnings: [], auditAnnotations: {} },
  };
  asked: PullRequest[] = [];
  async judge(pull: PullRequest): Promise<PullVerdict> {
    this.asked.push(pull);
    return this.verdict;
  }
}

let dir: string;
let fake: FakeImageService;
let store: RecordStore;
let proxy: NodeImageProxy;
let judge: ScriptedJudge;
let metrics: NodeMetrics;
let policies: { generation: string; everyPod: boolean };

async function start(verifyPresent: VerifyPresent = "IfNotVerified"): Promise<void> {
  await proxy?.stop();
  store = await RecordStore.open(dir);
  metrics = createNodeMetrics(() => store);
  const verification: PullVerification = { gate: judge, verifyPresent, policies: () => policies };
  // NeverVerify: the KEP-2535 credential check stays out of the way of what is tested here.
  proxy = inProcessNodeProxy({ store, runtime: fake.runtime, policy: "NeverVerify", metrics, verification });
  await proxy.start();
}

const status = async (image: string, pod?: string) =>
  decodeImageStatusResponse(await proxy.handle(fake.call("ImageStatus", imageStatusRequest(image, pod))))?.id;
const pull = async (image: string, pod: string) => decodePullImageResponse(await proxy.handle(fake.call("PullImage", pullImageRequest(image, pod)))).imageRef;
const counted = async (name: string, labels: Record<string, string>) =>
  (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;

beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), "imprimatur-node-verify-")), "state");
  fake = new FakeImageService();
  fake.publish(BY_DIGEST, IMAGE_ID);
  fake.publish(TAG, OLD_ID);
  judge = new ScriptedJudge();
  policies = { generation: "g1", everyPod: true };
});

afterEach(async () => {
  await proxy?.stop();
  await rm(join(dir, ".."), { recursive: true, force: true });
});

test("a refused pull fails with PERMISSION_DENIED and the reason, and nothing reaches the runtime", async () => {
  await start();
  judge.verdict = { outcome: "refused", message: "imprimatur node-proxy refused the pull: image … denied", digest: DIGEST };
  await assert.rejects(proxy.handle(fake.call("PullImage", pullImageRequest(TAG, "web"))), (e: { code: number; details: string }) => {
    assert.equal(e.code, grpc.status.PERMISSION_DENIED);
    assert.equal(e.details, "imprimatur node-proxy refused the pull: image … denied");
    return true;
  });
  assert.deepEqual(
    fake.forwarded.filter((f) => f.method === "PullImage"),
    [],
  );
  assert.equal(await counted("imprimatur_node_pull_verifications_total", { outcome: "refused" }), 1);
  assert.equal(await counted("imprimatur_node_cri_calls_total", { method: "PullImage", code: "PERMISSION_DENIED" }), 1);
});

test("a verified pull asks the runtime for the digest, judged for the pod in the sandbox; the tag then finds the image verified", async () => {
  await start();
  assert.equal(await pull(TAG, "web"), IMAGE_ID);
  assert.deepEqual(
    fake.forwarded.filter((f) => f.method === "PullImage").map((f) => f.image),
    [BY_DIGEST],
  );
  assert.deepEqual(
    judge.asked.map((a) => [a.image, a.pod?.namespace, a.pod?.name]),
    [[TAG, "team", "web"]],
  );
  // The runtime has the digest, not the tag: the tag is answered with the image verified, for this pod and another.
  assert.equal(await status(TAG, "web"), IMAGE_ID);
  assert.equal(await status(TAG, "other"), IMAGE_ID);
  await proxy.stop();
  assert.deepEqual(store.verification(IMAGE_ID)?.names, [TAG]);
  assert.equal(store.verification(IMAGE_ID)?.policyGeneration, "g1");
  assert.equal(await counted("imprimatur_node_pull_verifications_total", { outcome: "verified" }), 1);
});

test("a verdict that depends on the pod stands for that pod only; a policy change makes every pod's pull judged again", async () => {
  policies = { generation: "g1", everyPod: false };
  await start();
  await pull(TAG, "web");
  assert.equal(await status(TAG, "web"), IMAGE_ID);
  assert.equal(await status(TAG, "other"), undefined);
  assert.equal(await counted("imprimatur_node_image_checks_total", { result: "not-verified" }), 1);
  policies = { generation: "g2", everyPod: true };
  assert.equal(await status(TAG, "web"), undefined, "verified under the policies before: not under these");
  assert.equal(await status(BY_DIGEST), IMAGE_ID, "other callers see what the runtime has");
  assert.equal(await status(TAG), undefined);
});

test("a pull without a sandbox (crictl pull) is judged as no pod's", async () => {
  await start();
  await proxy.handle(fake.call("PullImage", encodePullImageRequest({ image: TAG })));
  assert.deepEqual(
    judge.asked.map((a) => [a.image, a.pod]),
    [[TAG, undefined]],
  );
});

test("a pull that failed open is sent on as judged but never counts as verified", async () => {
  await start();
  judge.verdict = { outcome: "failed-open", pullAs: TAG, reason: "the registry gave no answer" };
  assert.equal(await pull(TAG, "web"), OLD_ID);
  assert.deepEqual(
    fake.forwarded.filter((f) => f.method === "PullImage").map((f) => f.image),
    [TAG],
  );
  assert.equal(await status(TAG, "web"), undefined);
  await proxy.stop();
  assert.equal(store.verification(OLD_ID), undefined);
});

test("an image on the node before: absent to pods under IfNotVerified, present under Never; other callers always see it", async () => {
  fake.preload(TAG, OLD_ID);
  await start();
  assert.equal(await status(TAG, "web"), undefined);
  assert.equal(await status(TAG), OLD_ID);
  await start("Never");
  assert.equal(await status(TAG, "web"), OLD_ID);
});

test("a name whose runtime image moved since it was verified is answered with the image verified", async () => {
  await start();
  await pull(TAG, "web");
  fake.preload(TAG, OLD_ID); // the tag pulled straight from the runtime since, onto another build
  assert.equal(await status(TAG, "web"), IMAGE_ID);
});

test("verification records survive a restart: the tag is found for every pod when the verdict held for every pod, else for none", async () => {
  await start();
  await pull(TAG, "web");
  await start();
  assert.equal(await status(TAG, "fresh"), IMAGE_ID);
  policies = { generation: "g2", everyPod: false };
  await start();
  await pull(TAG, "web");
  await start();
  assert.equal(await status(TAG, "fresh"), undefined, "the verdict depended on the pod: each pod's pull is judged again");
  assert.equal(await status(TAG, "web"), undefined, "what a pod had verified is not remembered across a restart");
});
