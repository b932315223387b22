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
import pino from "pino";
import {
  decodeImageStatusResponse,
  decodePullImageResponse,
  encodePullImageRequest,
  encodePullImageResponse,
  encodeRemoveImageRequest,
} from "../../../src/cri/cri-messages.ts";
import { createNodeMetrics, type NodeMetrics } from "../../../src/node/node-metrics.ts";
import {
  NodeImageProxy,
  VERIFY_PRESENT_MODES,
  type NodeImageProxyOptions,
  type PullVerification,
  type VerifyPresent,
} from "../../../src/node/node-image-proxy.ts";
import type { NodePodView } from "../../../src/node/pod-pull-secrets.ts";
import type { PullRequest, PullVerdict } from "../../../src/node/pull-gate.ts";
import { RecordStore } from "../../../src/node/record-store.ts";
import { inProcessNodeProxy } from "../../support/in-process-node-proxy.ts";
import { imageStatusRequest, kubeletPod, pullImageRequest, type KubeletAuth } from "../../support/kubelet-cri.ts";
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
  /** How long before its deadline each pull was judged (ms). */
  timeLeft: number[] = [];
  async judge(pull: PullRequest, deadline: number): Promise<PullVerdict> {
    this.asked.push(pull);
    this.timeLeft.push(deadline - Date.now());
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
/** What the proxy logged since the test began (every level). */
let logs: Array<{ level: number; msg: string; [field: string]: unknown }>;

/** `more`: options beside verification, such as the KEP-2535 policy and an API view of the pods. */
async function start(verifyPresent: VerifyPresent = "IfNotVerified", more: Partial<NodeImageProxyOptions> = {}): Promise<void> {
  await proxy?.stop();
  store = await RecordStore.open(dir);
  metrics = createNodeMetrics(() => store);
  const verification: PullVerification = { gate: judge, verifyPresent, policies: () => policies };
  const logger = pino({ level: "debug" }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  // NeverVerify: the KEP-2535 credential check stays out of the way of what is tested here.
  proxy = inProcessNodeProxy({ store, runtime: fake.runtime, policy: "NeverVerify", metrics, verification, logger, ...more });
  await proxy.start();
}

const status = async (image: string, pod?: string) =>
  decodeImageStatusResponse(await proxy.handle(fake.call("ImageStatus", imageStatusRequest(image, pod))))?.id;
const pull = async (image: string, pod: string, auth?: KubeletAuth) =>
  decodePullImageResponse(await proxy.handle(fake.call("PullImage", pullImageRequest(image, pod, auth)))).imageRef;
const counted = async (name: string, labels: Record<string, string>) =>
  (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;

beforeEach(async () => {
  logs = [];
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

test("--verify-present accepts exactly the modes the proxy tells apart: IfNotVerified hides an image not verified, Never uses it", async () => {
  fake.preload(TAG, OLD_ID);
  const seen: Record<string, string | undefined> = {};
  for (const mode of VERIFY_PRESENT_MODES) {
    await start(mode);
    seen[mode] = await status(TAG, "web");
  }
  assert.deepEqual(seen, { IfNotVerified: undefined, Never: OLD_ID });
});

test("a name on an image the pod may use is answered as the runtime has it, though the name was verified as another image before", async () => {
  const OLD_DIGEST = `sha256:${"e".repeat(64)}`;
  const OLD_BY_DIGEST = `${REPO}@${OLD_DIGEST}`;
  await start();
  assert.equal(await pull(TAG, "web"), IMAGE_ID);
  fake.preload(TAG, OLD_ID); // the tag pulled straight from the runtime since, onto another build…
  fake.publish(OLD_BY_DIGEST, OLD_ID);
  judge.verdict = {
    outcome: "verified",
    pullAs: OLD_BY_DIGEST,
    digest: OLD_DIGEST,
    decision: { allowed: true, violations: [], warnings: [], auditAnnotations: {} },
  };
  assert.equal(await pull(OLD_BY_DIGEST, "web"), OLD_ID); // …which was verified too, by its digest
  assert.equal(await status(TAG, "web"), OLD_ID);
  assert.equal(await status(TAG, "other"), OLD_ID);
});

test("under Never, a tag verified under the policies before is not found as its digest: the pod's pull is judged again", async () => {
  await start("Never");
  await pull(TAG, "web");
  assert.equal(await status(TAG, "web"), IMAGE_ID);
  policies = { generation: "g2", everyPod: true };
  assert.equal(await status(TAG, "web"), undefined, "the runtime has the digest only, verified under other policies");
  assert.equal(await status(BY_DIGEST, "web"), IMAGE_ID, "what is on the node is used as it is");
});

test("a name left on an image whose verification record is gone finds nothing (and the call does not fail)", async () => {
  const TAG2 = `${REPO}:v1.1`;
  await start();
  await pull(TAG, "web");
  policies = { generation: "g2", everyPod: true };
  await pull(TAG2, "web"); // the same digest under a new generation: the record now names TAG2 only
  await proxy.handle(fake.call("RemoveImage", encodeRemoveImageRequest(BY_DIGEST)));
  assert.equal(store.verification(IMAGE_ID), undefined);
  assert.equal(await status(TAG, "web"), undefined);
  assert.equal(await status(TAG2, "web"), undefined);
});

test("a pull answered from the records is verified like one sent on: the pod may then use the image under the policies in force", async () => {
  const CRED = { username: "alice", password: "s3cret" };
  const view: NodePodView = { arrival: () => 1, credentialHashes: async () => undefined, pullPolicy: async () => "IfNotPresent" };
  fake.publish(BY_DIGEST, IMAGE_ID, CRED);
  await start("IfNotVerified", { policy: "AlwaysVerify", podSecrets: view });
  assert.equal(await pull(TAG, "a", CRED), IMAGE_ID);
  await proxy.stop(); // the credential's record is written after the answer
  // Verified for every pod, but b has not shown the credential: absent, so that b pulls with its own.
  assert.equal(await status(TAG, "b"), undefined);
  policies = { generation: "g2", everyPod: false };
  assert.equal(await pull(TAG, "b", CRED), IMAGE_ID);
  assert.equal(fake.registryPulls, 1, "b's pull was answered from the records");
  assert.deepEqual(
    judge.asked.map((a) => a.pod?.name),
    ["a", "b"],
  );
  assert.equal(await status(TAG, "b"), IMAGE_ID);
  assert.equal(await status(TAG, "a"), undefined, "a's pull was judged under the policies before");
  await proxy.stop();
  assert.equal(store.verification(IMAGE_ID)?.policyGeneration, "g2");
});

test("a runtime's answer without an image reference records no verification: the name stays on the image verified before", async () => {
  await start();
  await pull(TAG, "web");
  const call = fake.call("PullImage", pullImageRequest(TAG, "other"));
  const answer = await proxy.handle({ ...call, forward: async () => encodePullImageResponse("") });
  assert.equal(decodePullImageResponse(answer).imageRef, "");
  assert.equal(await status(TAG, "web"), IMAGE_ID);
  await proxy.stop();
  assert.equal(store.verification(""), undefined);
});

test("the judge is given a minute for a pull", async () => {
  await start();
  await pull(TAG, "web");
  assert.equal(judge.timeLeft.length, 1);
  assert.ok(judge.timeLeft[0]! > 50_000 && judge.timeLeft[0]! <= 60_000, `${judge.timeLeft[0]} ms`);
});

test("what the operator is told: each pull refused or verified once, with the pod, the image and the digest; an image reported absent", async () => {
  const INFO = 30;
  const DEBUG = 20;
  const entries = (msg: string) => logs.filter((l) => l.msg === msg);
  fake.preload(TAG, OLD_ID);
  await start();
  assert.equal(await status(TAG, "web"), undefined);
  assert.deepEqual(
    entries("image reported absent: not verified for this pod under the policies in force").map((l) => [l.level, l.image, l.imageRef]),
    [[DEBUG, TAG, OLD_ID]],
  );
  judge.verdict = { outcome: "refused", message: "imprimatur node-proxy refused the pull: image … denied", digest: DIGEST };
  await assert.rejects(pull(TAG, "web"));
  assert.deepEqual(
    entries("pull refused").map((l) => [l.level, l.pod, l.image, l.digest, l.reason]),
    [[INFO, kubeletPod("web"), TAG, DIGEST, "imprimatur node-proxy refused the pull: image … denied"]],
  );
  judge.verdict = { outcome: "failed-open", pullAs: TAG, reason: "the registry gave no answer" };
  await pull(TAG, "web");
  assert.deepEqual(entries("pull verified"), [], "failed open is not verified");
  judge.verdict = new ScriptedJudge().verdict;
  await pull(TAG, "web");
  assert.deepEqual(
    entries("pull verified").map((l) => [l.level, l.pod, l.image, l.digest, l.generation]),
    [[INFO, kubeletPod("web"), TAG, DIGEST, "g1"]],
  );
  assert.equal(entries("pull refused").length, 1);
});
