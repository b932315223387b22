// The node proxy's decisions (src/node/node-image-proxy.ts) over CRI calls, in-process: a fake runtime and registry
// (fake-image-service.ts, real CRI message bytes), a real RecordStore in a temp folder, and a fake API view of the
// node's pods. The same decisions against real containerd and a real kubelet are in test/e2e/node-proxy-*.test.ts.
import assert from "node:assert/strict";
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import pino from "pino";
import type { ImageReference } from "../../../src/core/image-reference.ts";
import { credentialHash } from "../../../src/core/pull-verification/credential-hash.ts";
import { credentialLessRecord, pullIntent, type PodRef } from "../../../src/core/pull-verification/pull-records.ts";
import type { AllowlistPattern, VerificationPolicy } from "../../../src/core/pull-verification/verification-policy.ts";
import { parseAllowlistPattern } from "../../../src/core/pull-verification/verification-policy.ts";
import {
  decodeImageStatusResponse,
  decodePullImageResponse,
  encodeImageStatusRequestFor,
  encodePullImageResponse,
  encodePullImageRequest,
  encodeRemoveImageRequest,
} from "../../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../../src/cri/image-service-proxy.ts";
import { createNodeMetrics, type NodeMetrics } from "../../../src/node/node-metrics.ts";
import { NodeImageProxy } from "../../../src/node/node-image-proxy.ts";
import { NodeProxyError } from "../../../src/node/node-proxy-error.ts";
import type { NodePodView, PullPolicy } from "../../../src/node/pod-pull-secrets.ts";
import { recordFileName, RecordStore, type RecordStoreOptions, type StoreStep } from "../../../src/node/record-store.ts";
import { imageStatusRequest, kubeletAnnotations, kubeletPod, kubeletSandbox, pullImageRequest } from "../../support/kubelet-cri.ts";
import { FakeImageService, type Credential } from "./fake-image-service.ts";

const PRIVATE = "registry.example.com/private/app:v1";
const PRIVATE_ID = `sha256:${"a".repeat(64)}`;
const PUBLIC = "registry.example.com/public/tool:v1";
const PUBLIC_ID = `sha256:${"b".repeat(64)}`;
const GOOD: Credential = { username: "alice", password: "s3cret" };
const SAME: Credential = { ...GOOD };
const WRONG: Credential = { username: "alice", password: "guess" };

/** A fake view of the node's pods: fixed candidates and pull policies. */
class FakeView implements NodePodView {
  tickets = 0;
  candidates: Array<{ pod: string; credential?: Credential }> | undefined;
  policies = new Map<string, PullPolicy>();
  asked: Array<{ arrival: number; image: string }> = [];
  /** How long before its deadline each question was asked (ms). */
  timeLeft: number[] = [];
  private readonly key: () => Buffer;
  constructor(key: () => Buffer) {
    this.key = key;
  }
  arrival(): number {
    return ++this.tickets;
  }
  async credentialHashes(arrival: number, image: string, _ref: ImageReference, deadline: number) {
    this.asked.push({ arrival, image });
    this.timeLeft.push(deadline - Date.now());
    return this.candidates?.map((c) => ({ pod: c.pod, hashes: c.credential ? [hashOf(this.key(), c.credential)] : [] }));
  }
  async pullPolicy(pod: PodRef, _ref: ImageReference, deadline: number): Promise<PullPolicy | undefined> {
    this.timeLeft.push(deadline - Date.now());
    return this.policies.get(pod.uid);
  }
}

const hashOf = (key: Buffer, c: Credential) => credentialHash(key, { ...c, auth: "", serverAddress: "", identityToken: "", registryToken: "" });

let dir: string;
let fake: FakeImageService;
let store: RecordStore;
let proxy: NodeImageProxy;
let view: FakeView;
let metrics: NodeMetrics;
/** What the proxy logged since the test began (every level). */
let logs: Array<{ level: number; msg: string; [field: string]: unknown }>;

async function start(
  o: {
    policy?: VerificationPolicy;
    allowlist?: AllowlistPattern[];
    withView?: boolean;
    runtime?: RuntimeImageClient;
    reconcileEveryMs?: number;
    storeOptions?: RecordStoreOptions;
  } = {},
): Promise<void> {
  await proxy?.stop();
  store = await RecordStore.open(dir, o.storeOptions);
  view = new FakeView(() => store.key);
  metrics = createNodeMetrics(() => store);
  proxy = new NodeImageProxy({
    store,
    runtime: o.runtime ?? fake.runtime,
    policy: o.policy ?? "NeverVerifyPreloadedImages",
    allowlist: o.allowlist ?? [],
    logger: pino({ level: "debug" }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    metrics,
    ...(o.withView ? { podSecrets: view } : {}),
    ...(o.reconcileEveryMs ? { reconcileEveryMs: o.reconcileEveryMs } : {}),
  });
  await proxy.start();
}

/** The value of one of the proxy's counters for the labels given (0 when never counted). */
async function counted(name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name)?.get();
  assert.ok(metric, `no metric ${name}`);
  return metric.values.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value))?.value ?? 0;
}

/** The kubelet's pull decision for `pod` (or, without a pod, any other caller): the image id it is told, or undefined. */
async function status(image: string, pod?: string): Promise<string | undefined> {
  return decodeImageStatusResponse(await proxy.handle(fake.call("ImageStatus", imageStatusRequest(image, pod))))?.id;
}

async function pull(image: string, pod: string, credential?: Credential): Promise<string> {
  const answer = decodePullImageResponse(await proxy.handle(fake.call("PullImage", pullImageRequest(image, pod, credential)))).imageRef;
  await proxy.stop(); // records are written after the answer: wait for them
  return answer;
}

beforeEach(async () => {
  logs = [];
  dir = join(await mkdtemp(join(tmpdir(), "imprimatur-node-proxy-")), "state");
  fake = new FakeImageService();
  fake.publish(PRIVATE, PRIVATE_ID, GOOD);
  fake.publish(PUBLIC, PUBLIC_ID);
});

afterEach(async () => {
  await proxy?.stop();
  await rm(join(dir, ".."), { recursive: true, force: true });
});

describe("ImageStatus of the kubelet's pull decision", () => {
  test("an image pulled with a credential is absent for a pod that has not shown it, present for the pod that pulled it and for other callers", async () => {
    await start();
    assert.equal(await status(PRIVATE, "a"), undefined, "not on the node yet");
    assert.equal(await pull(PRIVATE, "a", GOOD), PRIVATE_ID);
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID);
    assert.equal(await status(PRIVATE, "b"), undefined, "b has shown no credential");
    assert.equal(await status(PRIVATE), PRIVATE_ID, "a call without a pod's annotations gets the truth");
    assert.equal(await pull(PRIVATE, "c", GOOD), PRIVATE_ID);
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID, "each pod that pulled it is remembered");
    assert.equal(await status(PRIVATE, "c"), PRIVATE_ID);
    const read = store.get(PRIVATE_ID);
    assert.ok(read.state === "ok");
    assert.deepEqual(
      read.record.credentialMapping["registry.example.com/private/app"]?.credentials?.[0]?.presentedBy,
      [kubeletPod("a"), kubeletPod("c")],
      "both pulls recorded",
    );
  });

  test("an anonymous pull makes the image every pod's", async () => {
    await start();
    await pull(PUBLIC, "a");
    assert.equal(await status(PUBLIC, "b"), PUBLIC_ID);
  });

  test("a record that cannot be read is no permission: absent", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await mkdir(join(dir, "pulled"), { recursive: true, mode: 0o700 });
    await writeFile(join(dir, "pulled", recordFileName(PRIVATE_ID)), "{not json");
    await writeFile(join(dir, "preloaded-images.json"), "{not json either");
    await start({ policy: "AlwaysVerify" });
    assert.equal(await status(PRIVATE, "a"), undefined);
  });

  test("an interrupted pull (an intent left behind) leaves an image nobody is recorded for", async () => {
    await start();
    fake.preload(PRIVATE, PRIVATE_ID); // pulled while the proxy was down after writing its intent
    await proxy.stop();
    await writeFile(join(dir, "pulling", recordFileName(PRIVATE)), JSON.stringify(pullIntent(PRIVATE)));
    await start();
    assert.equal(await status(PRIVATE, "a"), undefined);
    assert.equal(store.get(PRIVATE_ID).state, "ok");
  });
});

describe("verification policies", () => {
  const preloadedStart = async (o: Parameters<typeof start>[0]) => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await start(o);
  };

  test("NeverVerifyPreloadedImages (default): an image on the node at the first start needs no credentials", async () => {
    await preloadedStart({});
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID);
  });

  test("a pull of the same image under another name leaves it preloaded under its own name (kubernetes#138175)", async () => {
    const COPY = "registry.example.com/private/copy:v1";
    fake.publish(COPY, PUBLIC_ID, GOOD);
    fake.preload(PUBLIC, PUBLIC_ID);
    await start();
    assert.equal(await pull(COPY, "a", GOOD), PUBLIC_ID, "another tenant pulls the same image under a private name");
    assert.equal(await status(PUBLIC, "b"), PUBLIC_ID, "still preloaded under its own name");
    assert.equal(await status(COPY, "b"), undefined, "the private name is still not everybody's");
  });

  test("a preloaded name pulled through the proxy is governed by its record from then on", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await start();
    assert.equal(await status(PRIVATE, "b"), PRIVATE_ID);
    assert.equal(await pull(PRIVATE, "a", GOOD), PRIVATE_ID);
    assert.equal(await status(PRIVATE, "c"), undefined);
  });

  test("AlwaysVerify: preloaded images too must be verified", async () => {
    await preloadedStart({ policy: "AlwaysVerify" });
    assert.equal(await status(PRIVATE, "a"), undefined);
  });

  test("NeverVerifyAllowlistedImages: preloaded and allowlisted only", async () => {
    const allow = (p: string) => parseAllowlistPattern(p) as AllowlistPattern;
    await preloadedStart({ policy: "NeverVerifyAllowlistedImages", allowlist: [allow("registry.example.com/private/*")] });
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID);
    await start({ policy: "NeverVerifyAllowlistedImages", allowlist: [allow("registry.example.com/other")] });
    assert.equal(await status(PRIVATE, "a"), undefined);
  });

  test("NeverVerify: every pod, whatever the records say", async () => {
    await start();
    await pull(PRIVATE, "a", GOOD);
    await start({ policy: "NeverVerify" });
    assert.equal(await status(PRIVATE, "b"), PRIVATE_ID);
  });
});

describe("PullImage after a report of absence", () => {
  test("with the API view and IfNotPresent, a recorded credential is answered from the records without the registry", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    await start({ withView: true });
    view.candidates = undefined;
    assert.equal(await status(PRIVATE, "b"), undefined);
    view.policies.set("uid-b", "IfNotPresent");
    const before = fake.registryPulls;
    assert.equal(await pull(PRIVATE, "b", SAME), PRIVATE_ID);
    assert.equal(fake.registryPulls, before, "not forwarded");
    assert.equal(await status(PRIVATE, "b"), PRIVATE_ID, "b has shown the credential now");
    // Another pod with a credential that was never recorded: the registry decides.
    assert.equal(await status(PRIVATE, "c"), undefined);
    view.policies.set("uid-c", "IfNotPresent");
    await assert.rejects(pull(PRIVATE, "c", WRONG), /401 Unauthorized/);
    assert.equal(fake.registryPulls, before + 1);
  });

  test("imagePullPolicy Always, an unknown pod, or no API view: the pull goes to the registry", async () => {
    for (const [withView, policy] of [
      [true, "Always"],
      [true, undefined],
      [false, undefined],
    ] as const) {
      await start({ withView });
      await pull(PRIVATE, "a", GOOD);
      assert.equal(await status(PRIVATE, "b"), undefined);
      if (policy) view.policies.set("uid-b", policy);
      const before = fake.registryPulls;
      await pull(PRIVATE, "b", SAME);
      assert.equal(fake.registryPulls, before + 1, `view ${withView}, policy ${policy ?? "unknown"}: forwarded`);
    }
  });

  test("a credential not recorded goes to the registry, which refuses it; the pod is still told the image is absent", async () => {
    await start();
    await pull(PRIVATE, "a", GOOD);
    assert.equal(await status(PRIVATE, "b"), undefined);
    await assert.rejects(pull(PRIVATE, "b", WRONG), /401 Unauthorized/);
    await assert.rejects(pull(PRIVATE, "b"), /401 Unauthorized/);
    assert.equal(await status(PRIVATE, "b"), undefined);
  });
});

describe("the API view: pods matched by their pull secrets", () => {
  test("every candidate's secrets must hold a recorded credential", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    view.candidates = [{ pod: "team/b", credential: SAME }];
    assert.equal(await status(PRIVATE, "b"), PRIVATE_ID);
    view.candidates = undefined;
    assert.equal(await status(PRIVATE, "b"), PRIVATE_ID, "remembered");
    view.candidates = [{ pod: "team/c", credential: SAME }, { pod: "other/d" }];
    assert.equal(await status(PRIVATE, "c"), undefined, "one candidate without it");
    view.candidates = [{ pod: "team/e", credential: WRONG }];
    assert.equal(await status(PRIVATE, "e"), undefined, "a credential that was not recorded");
    view.candidates = undefined;
    assert.equal(await status(PRIVATE, "f"), undefined, "no view in time");
    // A view that names no pod proves nothing about the caller (every() of nothing is true).
    view.candidates = [];
    assert.equal(await status(PRIVATE, "g"), undefined, "no candidate at all");
  });

  test("an ImageStatus asks the view with the ticket taken when it arrived; a pull takes none", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    const ticket = view.tickets;
    await status(PRIVATE, "b");
    assert.deepEqual(view.asked.at(-1), { arrival: ticket + 1, image: PRIVATE });
    view.policies.set("uid-b", "IfNotPresent");
    await pull(PRIVATE, "b", SAME);
    assert.equal(view.tickets, ticket + 1, "a pull reads its pod when it asks: no ticket");
    assert.equal(view.timeLeft.length, 2);
    for (const left of view.timeLeft) assert.ok(left > 4_000 && left <= 5_000, `the API may take up to 5 s, not ${left} ms`);
  });
});

describe("removing images", () => {
  test("RemoveImage drops the record; a pull of the image again starts afresh", async () => {
    await start();
    await pull(PRIVATE, "a", GOOD);
    await proxy.handle(fake.call("RemoveImage", encodeRemoveImageRequest(PRIVATE)));
    assert.equal(store.get(PRIVATE_ID).state, "none");
  });

  test("pruning drops the records of images the runtime no longer lists", async () => {
    await start();
    await pull(PRIVATE, "a", GOOD);
    fake.delete(PRIVATE_ID);
    await proxy.reconcile();
    assert.equal(store.get(PRIVATE_ID).state, "none");
  });
});

describe("a record that cannot be written", () => {
  test("the pull's intent survives (retried, then left for the next start, which records the image for nobody)", async () => {
    await start();
    await rm(join(dir, "pulled"), { recursive: true }); // every write of a record fails now
    assert.equal(await pull(PRIVATE, "a", GOOD), PRIVATE_ID, "the pull itself succeeded");
    assert.deepEqual(await readdir(join(dir, "pulling")), [recordFileName(PRIVATE)], "the intent is still there");
    assert.equal(store.counts().intentsInFlight, 0, "the pull is over");
    const failed = logs.filter((l) => /the pull's record could not be written; its intent stays, and the next start records the image for nobody/.test(l.msg));
    assert.equal(failed.length, 1);
    assert.deepEqual([failed[0]!.level, failed[0]!.image, failed[0]!.imageRef, failed[0]!.pod], [50, PRIVATE, PRIVATE_ID, kubeletPod("a")]);
    await start();
    const read = store.get(PRIVATE_ID);
    assert.ok(read.state === "ok" && Object.keys(read.record.credentialMapping).length === 0, "recorded for nobody");
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
    assert.equal(await status(PRIVATE, "b"), undefined);
  });

  test("an intent that cannot be written refuses the pull before it reaches the registry", async () => {
    await start();
    await rm(join(dir, "pulling"), { recursive: true });
    await assert.rejects(pull(PRIVATE, "a", GOOD), /ENOENT/);
    assert.equal(fake.registryPulls, 0);
    assert.equal(store.get(PRIVATE_ID).state, "none");
  });

  test("an intent that cannot be made durable fails the pull: no record, no intent in flight", async () => {
    await start();
    const writeIntent = store.writeIntent.bind(store);
    store.writeIntent = (image: string) => {
      const written = writeIntent(image);
      const durable = written.durable.then(() => Promise.reject(new Error("fsync: input/output error")));
      durable.catch(() => {});
      return { durable };
    };
    await assert.rejects(pull(PRIVATE, "a", GOOD), (e: Error) => {
      assert.equal(e.message, `imprimatur node-proxy could not record the pull of ${PRIVATE}: fsync: input/output error`);
      assert.ok(e instanceof NodeProxyError);
      assert.equal(e.code, "pull-not-recorded");
      assert.equal((e.cause as Error).message, "fsync: input/output error");
      return true;
    });
    assert.equal(store.get(PRIVATE_ID).state, "none");
    assert.equal(store.counts().intentsInFlight, 0);
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
    assert.equal(await counted("imprimatur_node_pulls_total", { result: "forwarded-ok" }), 0);
    const failed = logs.filter((l) => /the pull intent could not be made durable: the pull is reported as failed/.test(l.msg));
    assert.equal(failed.length, 1);
    assert.deepEqual([failed[0]!.level, failed[0]!.image], [50, PRIVATE]);
    assert.equal(await status(PRIVATE, "a"), undefined, "the pod is not remembered");
  });

  test("a pull the registry refuses leaves no intent", async () => {
    await start();
    await assert.rejects(pull(PRIVATE, "a", WRONG), /401/);
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
    assert.equal(store.counts().intentsInFlight, 0);
  });

  test("a write that fails once is retried: the record is written and the intent removed", async () => {
    await start();
    await rm(join(dir, "pulled"), { recursive: true });
    setTimeout(() => void mkdir(join(dir, "pulled"), { mode: 0o700 }), 30);
    await pull(PUBLIC, "a");
    assert.deepEqual(await readdir(join(dir, "pulled")), [recordFileName(PUBLIC_ID)]);
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
  });
});

describe("metrics: how each call was answered", () => {
  const CHECKS = "imprimatur_node_image_checks_total";
  const PULLS = "imprimatur_node_pulls_total";
  const CALLS = "imprimatur_node_cri_calls_total";

  test("each ImageStatus is counted by its result", async () => {
    await start({ withView: true });
    await status(PRIVATE);
    await status(PRIVATE, "a");
    await pull(PRIVATE, "a", GOOD);
    await pull(PUBLIC, "a");
    view.candidates = [{ pod: "team/x", credential: SAME }];
    await status(PRIVATE, "a");
    await status(PUBLIC, "b");
    view.candidates = undefined;
    await status(PRIVATE, "b");
    view.candidates = [{ pod: "team/c", credential: SAME }];
    await status(PRIVATE, "c");
    for (const result of ["not-a-pod", "absent", "pod-verified", "all-pods", "must-pull", "pod-secrets"])
      assert.equal(await counted(CHECKS, { result }), 1, result);
    assert.equal(await counted(CALLS, { method: "ImageStatus", code: "OK" }), 6);
    await start({ policy: "NeverVerify" });
    await status(PRIVATE, "d");
    assert.equal(await counted(CHECKS, { result: "policy-skip" }), 1);
  });

  test("an unreadable record is counted as such", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await mkdir(join(dir, "pulled"), { recursive: true, mode: 0o700 });
    await writeFile(join(dir, "pulled", recordFileName(PRIVATE_ID)), "{not json");
    await start({ policy: "AlwaysVerify" });
    assert.equal(await status(PRIVATE, "a"), undefined);
    assert.equal(await counted(CHECKS, { result: "unreadable-record" }), 1);
  });

  test("pulls by outcome; a refused reuse of an image on the node is counted, a refused first pull is not", async () => {
    await start();
    await pull(PRIVATE, "a", GOOD);
    await assert.rejects(pull(PRIVATE, "b", WRONG), /401/);
    assert.equal(await counted("imprimatur_node_reuse_denied_total"), 0, "nothing was hidden from b");
    assert.equal(await status(PRIVATE, "b"), undefined);
    await assert.rejects(pull(PRIVATE, "b", WRONG), /401/);
    assert.equal(await counted("imprimatur_node_reuse_denied_total"), 1);
    assert.equal(await counted(PULLS, { result: "forwarded-ok" }), 1);
    assert.equal(await counted(PULLS, { result: "forwarded-failed" }), 2);
    assert.equal(await counted(CALLS, { method: "PullImage", code: "OK" }), 1);
    assert.equal(await counted(CALLS, { method: "PullImage", code: "UNKNOWN" }), 2, "the runtime's gRPC code");
  });

  test("a pull answered from the records is counted as such", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    await status(PRIVATE, "b");
    view.policies.set("uid-b", "IfNotPresent");
    await pull(PRIVATE, "b", SAME);
    assert.equal(await counted(PULLS, { result: "answered-from-records" }), 1);
    assert.equal(await counted(PULLS, { result: "forwarded-ok" }), 1);
  });
});

describe("calls the proxy cannot read, and calls it does not look into", () => {
  test("a malformed request is refused as INVALID_ARGUMENT and not forwarded", async () => {
    await start();
    await assert.rejects(proxy.handle(fake.call("ImageStatus", Buffer.from([0x0a, 0x05]))), (e: { code: number }) => e.code === 3);
    assert.deepEqual(fake.forwarded, []);
    assert.equal(await counted("imprimatur_node_cri_calls_total", { method: "ImageStatus", code: "INVALID_ARGUMENT" }), 1);
  });

  test("other methods are forwarded untouched; a failure that is no gRPC error is counted INTERNAL and passed on", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await start();
    const listed = await proxy.handle(fake.call("ListImages", Buffer.alloc(0)));
    assert.deepEqual(fake.forwarded, [{ method: "ListImages" }]);
    assert.ok(listed.length > 0);
    const failing = { ...fake.call("ImageFsInfo", Buffer.alloc(0)), forward: async () => Promise.reject(new Error("socket closed")) };
    await assert.rejects(proxy.handle(failing), /socket closed/);
    assert.equal(await counted("imprimatur_node_cri_calls_total", { method: "ImageFsInfo", code: "INTERNAL" }), 1);
    assert.equal(await counted("imprimatur_node_cri_calls_total", { method: "ListImages", code: "OK" }), 1);
  });
});

describe("the runtime's CRI package for the proxy's own calls", () => {
  const onlyPackage = (served: string, calls: string[]) =>
    ({
      call: async (pkg: string, method: string, request: Buffer, o: { deadline: number }) => {
        calls.push(pkg);
        const left = o.deadline - Date.now();
        assert.ok(left > 25_000 && left <= 30_000, `the runtime may take up to 30 s, not ${left} ms`);
        if (pkg !== served) throw Object.assign(new Error(`unknown service ${pkg}`), { code: 12 });
        return fake.runtime.call(pkg as never, method as never, request, o as never);
      },
      close: () => {},
    }) as unknown as RuntimeImageClient;

  test("a runtime that serves only v1alpha2: the proxy's calls switch to it and stay there", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    const calls: string[] = [];
    await start({ runtime: onlyPackage("runtime.v1alpha2", calls) });
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID, "the first start listed the preloaded image");
    await proxy.reconcile();
    assert.deepEqual(calls, ["runtime.v1", "runtime.v1alpha2", "runtime.v1alpha2"]);
  });

  test("a runtime upgraded to serve only v1: the proxy's calls switch back", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    const calls: string[] = [];
    let served = "runtime.v1alpha2";
    const runtime = {
      call: async (pkg: string, method: string, request: Buffer, o: object) => {
        calls.push(pkg);
        if (pkg !== served) throw Object.assign(new Error(`unknown service ${pkg}`), { code: 12 });
        return fake.runtime.call(pkg as never, method as never, request, o as never);
      },
      close: () => {},
    } as unknown as RuntimeImageClient;
    await start({ runtime });
    served = "runtime.v1";
    await proxy.reconcile();
    assert.deepEqual(calls, ["runtime.v1", "runtime.v1alpha2", "runtime.v1alpha2", "runtime.v1"]);
  });

  test("a runtime error other than UNIMPLEMENTED is not a reason to switch", async () => {
    const calls: string[] = [];
    const runtime = {
      call: async (pkg: string) => {
        calls.push(pkg);
        throw Object.assign(new Error("connection refused"), { code: 14 });
      },
      close: () => {},
    } as unknown as RuntimeImageClient;
    await assert.rejects(start({ runtime }), /connection refused/);
    assert.deepEqual(calls, ["runtime.v1"]);
  });
});

describe("start-up and pruning", () => {
  // The boot race: the proxy starts before the runtime's socket is up. The runtime that is not up is real (a gRPC
  // client to a socket nobody serves); the one that comes up is the fake, as everywhere here (no containerd in
  // unit tests; test/e2e/node-proxy-cri.test.ts does the same against a real one).
  test("a first start that fails because the runtime is not up leaves no sign of a start: the next start takes the snapshot", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    const down = new RuntimeImageClient(`unix://${join(dir, "..", "runtime-not-up.sock")}`);
    try {
      await assert.rejects(start({ runtime: down }), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
    } finally {
      down.close();
    }
    assert.equal(store.snapshot, "due", "a failed first start is still before the first start");
    await start();
    assert.equal(store.snapshot, "taken");
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID, "the image baked into the node is preloaded: no credentials needed");
    assert.equal(logs.filter((l) => /first start: the images on the node are recorded as preloaded/.test(l.msg)).length, 1);
  });

  test("a snapshot that cannot be written fails the start, and the next start takes it", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    const diskFull = (step: StoreStep) => {
      if (step === "preloaded-temporary-written") throw Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
    };
    await assert.rejects(start({ storeOptions: { onStep: diskFull } }), /ENOSPC/);
    await start();
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID);
    assert.deepEqual(
      (await readdir(dir)).filter((n) => n.endsWith(".tmp")),
      [],
      "the temporary file of the failed write is gone",
    );
  });

  test("records without a snapshot: the snapshot is missing, nothing counts as preloaded, and a warning says so at every start", async () => {
    await start();
    await pull(PUBLIC, "a");
    await rm(join(dir, "preloaded-images.json"));
    fake.preload(PRIVATE, PRIVATE_ID);
    logs = [];
    await start();
    assert.equal(store.snapshot, "missing");
    assert.equal(await status(PRIVATE, "a"), undefined, "an image the proxy did not see arrive is not taken for preloaded");
    const warned = logs.filter((l) => /no preloaded-image snapshot/.test(l.msg));
    assert.equal(warned.length, 1);
    assert.equal(warned[0]!.level, 40);
    assert.equal(warned[0]!.stateDir, dir);
    assert.ok(!logs.some((l) => /first start/.test(l.msg)), "not a first start");
    await assert.rejects(readFile(join(dir, "preloaded-images.json")), { code: "ENOENT" }, "no snapshot is taken late");
  });

  test("an intent without a snapshot is a sign of an earlier start too", async () => {
    await RecordStore.open(dir);
    await writeFile(join(dir, "pulling", recordFileName(PRIVATE)), JSON.stringify(pullIntent(PRIVATE)));
    fake.preload(PRIVATE, PRIVATE_ID);
    await start();
    assert.equal(store.snapshot, "missing");
    assert.equal(await status(PRIVATE, "a"), undefined);
  });

  test("images that appear after the first start are not preloaded; a later start with its snapshot warns of nothing", async () => {
    await start();
    await proxy.stop();
    fake.preload(PRIVATE, PRIVATE_ID);
    logs = [];
    await start();
    assert.equal(await status(PRIVATE, "a"), undefined);
    assert.equal(store.snapshot, "taken");
    assert.deepEqual(
      logs.filter((l) => l.level >= 40).map((l) => l.msg),
      [],
    );
  });

  test("an unreadable intent and an intent for an image that is not on the node are dropped without a record", async () => {
    await start();
    await proxy.stop();
    await writeFile(join(dir, "pulling", recordFileName(PRIVATE)), JSON.stringify(pullIntent(PRIVATE)));
    await writeFile(join(dir, "pulling", recordFileName(PUBLIC)), "{not json");
    await start();
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
    assert.equal(store.get(PRIVATE_ID).state, "none");
  });

  test("an intent left for an image that already has a record keeps the record", async () => {
    await start();
    await pull(PUBLIC, "a");
    await writeFile(join(dir, "pulling", recordFileName(PUBLIC)), JSON.stringify(pullIntent(PUBLIC)));
    await start();
    assert.equal(await status(PUBLIC, "b"), PUBLIC_ID, "still every pod's");
  });

  test("pruning runs periodically until the proxy stops", async () => {
    await start({ reconcileEveryMs: 20 });
    await proxy.handle(fake.call("PullImage", encodePullImageRequest({ image: PUBLIC })));
    const until = async (done: () => boolean) => {
      for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(done());
    };
    await until(() => store.get(PUBLIC_ID).state === "ok");
    fake.delete(PUBLIC_ID);
    await until(() => store.get(PUBLIC_ID).state === "none");
    await pull(PRIVATE, "a", GOOD); // stops the proxy
    fake.delete(PRIVATE_ID);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(store.get(PRIVATE_ID).state, "ok", "no pruning after stop");
  });
});

describe("what a pod has shown is forgotten with the image", () => {
  const OTHER = "registry.example.com/private/other:v1";
  const OTHER_ID = `sha256:${"c".repeat(64)}`;

  test("RemoveImage: the image imported again is absent for the pod that pulled it; other images stay its", async () => {
    fake.publish(OTHER, OTHER_ID, GOOD);
    await start();
    await pull(PRIVATE, "a", GOOD);
    await pull(OTHER, "a", GOOD);
    await proxy.handle(fake.call("RemoveImage", encodeRemoveImageRequest(PRIVATE)));
    fake.preload(PRIVATE, PRIVATE_ID);
    assert.equal(await status(PRIVATE, "a"), undefined);
    assert.equal(await status(OTHER, "a"), OTHER_ID);
  });

  test("pruning: the same", async () => {
    fake.publish(OTHER, OTHER_ID, GOOD);
    await start();
    await pull(PRIVATE, "a", GOOD);
    await pull(OTHER, "a", GOOD);
    fake.delete(PRIVATE_ID);
    await proxy.reconcile();
    fake.preload(PRIVATE, PRIVATE_ID);
    assert.equal(await status(PRIVATE, "a"), undefined);
    assert.equal(await status(OTHER, "a"), OTHER_ID);
  });

  test("a RemoveImage the runtime did not carry out keeps the record", async () => {
    await start();
    await pull(PRIVATE, "a", GOOD);
    await proxy.handle({ ...fake.call("RemoveImage", encodeRemoveImageRequest(PRIVATE)), forward: async () => Buffer.alloc(0) });
    assert.equal(store.get(PRIVATE_ID).state, "ok");
    assert.equal(await status(PRIVATE, "a"), PRIVATE_ID);
  });
});

describe("answering a pull from the records: every condition", () => {
  const hiddenFromB = async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    assert.equal(await status(PRIVATE, "b"), undefined);
  };
  const pullAs = async (pod: string, uid: string, credential?: Credential) => {
    const request = encodePullImageRequest({
      image: PRIVATE,
      annotations: kubeletAnnotations(pod),
      ...(credential ? { auth: credential } : {}),
      sandbox: { ...kubeletSandbox(pod), uid },
    });
    const answer = decodePullImageResponse(await proxy.handle(fake.call("PullImage", request))).imageRef;
    await proxy.stop();
    return answer;
  };

  test("the answer records who presented the credential", async () => {
    await hiddenFromB();
    view.policies.set("uid-b", "IfNotPresent");
    await pull(PRIVATE, "b", SAME);
    const read = store.get(PRIVATE_ID);
    assert.ok(read.state === "ok");
    const presented = read.record.credentialMapping["registry.example.com/private/app"]?.credentials?.[0]?.presentedBy;
    assert.deepEqual(presented, [kubeletPod("a"), kubeletPod("b")]);
  });

  test("imagePullPolicy Never is answered from the records too", async () => {
    await hiddenFromB();
    view.policies.set("uid-b", "Never");
    const before = fake.registryPulls;
    assert.equal(await pull(PRIVATE, "b", SAME), PRIVATE_ID);
    assert.equal(fake.registryPulls, before);
  });

  test("a report of absence is used once: the next pull of the pod goes to the registry", async () => {
    await hiddenFromB();
    view.policies.set("uid-b", "IfNotPresent");
    const before = fake.registryPulls;
    await pull(PRIVATE, "b", SAME);
    await pull(PRIVATE, "b", SAME);
    assert.equal(fake.registryPulls, before + 1);
  });

  test("a pod without a UID cannot be looked up: forwarded", async () => {
    await hiddenFromB();
    view.policies.set("", "IfNotPresent");
    const before = fake.registryPulls;
    await pullAs("b", "", SAME);
    assert.equal(fake.registryPulls, before + 1);
  });

  test("an image removed since the report of absence: forwarded", async () => {
    await hiddenFromB();
    view.policies.set("uid-b", "IfNotPresent");
    fake.delete(PRIVATE_ID);
    const before = fake.registryPulls;
    assert.equal(await pull(PRIVATE, "b", SAME), PRIVATE_ID);
    assert.equal(fake.registryPulls, before + 1);
  });

  test("a record that no longer names the credential: forwarded", async () => {
    await hiddenFromB();
    view.policies.set("uid-b", "IfNotPresent");
    await store.update(PRIVATE_ID, () => credentialLessRecord(PRIVATE_ID, new Date()));
    const before = fake.registryPulls;
    await pull(PRIVATE, "b", SAME);
    assert.equal(fake.registryPulls, before + 1);
  });
});

describe("the API view: what does not cover a pod", () => {
  test("a call cancelled while the view was read: absent, and the pod is not remembered", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    view.candidates = [{ pod: "team/b", credential: SAME }];
    const cancelled = new AbortController();
    cancelled.abort();
    const answer = await proxy.handle(fake.call("ImageStatus", imageStatusRequest(PRIVATE, "b"), cancelled.signal));
    assert.equal(decodeImageStatusResponse(answer), undefined);
    view.candidates = undefined;
    assert.equal(await status(PRIVATE, "b"), undefined);
  });

  test("an image on the node with no record: the view is not asked", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await start({ withView: true, policy: "AlwaysVerify" });
    view.candidates = [{ pod: "team/b", credential: SAME }];
    assert.equal(await status(PRIVATE, "b"), undefined);
    assert.deepEqual(view.asked, []);
  });

  test("an image asked for by its ID stays absent for a pod, even one whose secrets hold the recorded credential", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    view.candidates = [{ pod: "team/b", credential: SAME }];
    assert.equal(await status(PRIVATE_ID, "b"), undefined);
    assert.equal(await status(PRIVATE_ID), PRIVATE_ID);
  });
});

describe("what the operator is told", () => {
  const WARN = 40;
  const entry = (msg: RegExp) => {
    const found = logs.filter((l) => msg.test(l.msg));
    assert.equal(found.length, 1, `one log entry ${msg}: ${JSON.stringify(logs.map((l) => l.msg))}`);
    return found[0]!;
  };

  test("first start, a refused reuse, an absence reported, an answer from the records and a forwarded pull", async () => {
    fake.preload(PUBLIC, PUBLIC_ID);
    await start({ withView: true });
    assert.deepEqual(entry(/first start: the images on the node are recorded as preloaded/).images, 1);
    await pull(PRIVATE, "a", GOOD);
    assert.equal(await status(PRIVATE, "b"), undefined);
    const absent = entry(/image reported absent: the pod has not shown credentials for it/);
    assert.deepEqual([absent.image, absent.imageRef, absent.result], [PRIVATE, PRIVATE_ID, "must-pull"]);
    await assert.rejects(pull(PRIVATE, "b", WRONG));
    const refused = entry(/pod refused an image already on the node: the registry did not accept its credentials/);
    assert.equal(refused.level, WARN);
    assert.deepEqual([refused.image, refused.imageRef, refused.credentials], [PRIVATE, PRIVATE_ID, "presented"]);
    assert.equal(refused.reason, `failed to pull ${PRIVATE}: 401 Unauthorized`);
    assert.deepEqual(refused.pod, kubeletPod("b"));
    logs = [];
    await status(PRIVATE, "c");
    await assert.rejects(pull(PRIVATE, "c"));
    assert.equal(entry(/pod refused an image/).credentials, "none");
    await status(PRIVATE, "d");
    await pull(PRIVATE, "d", SAME);
    const forwarded = entry(/pull forwarded to the registry: the pod's pull policy is Always or unknown/);
    assert.deepEqual([forwarded.image, forwarded.policy], [PRIVATE, "unknown"]);
    await status(PRIVATE, "e");
    view.policies.set("uid-e", "Always");
    logs = [];
    await pull(PRIVATE, "e", SAME);
    assert.equal(entry(/pull forwarded to the registry/).policy, "Always");
    await status(PRIVATE, "f");
    view.policies.set("uid-f", "IfNotPresent");
    await pull(PRIVATE, "f", SAME);
    const answered = entry(/credential already recorded for the image: answered from the records/);
    assert.deepEqual([answered.image, answered.imageRef], [PRIVATE, PRIVATE_ID]);
    assert.deepEqual(answered.pod, kubeletPod("f"));
    view.candidates = [{ pod: "team/g", credential: SAME }];
    await status(PRIVATE, "g");
    const secrets = entry(/the pull secrets of every pod naming the image hold a credential recorded for it/);
    assert.deepEqual([secrets.pods, secrets.image, secrets.imageRef], [["team/g"], PRIVATE, PRIVATE_ID]);
  });

  test("start-up: an interrupted pull, an unreadable intent, pruned records", async () => {
    await start();
    await pull(PUBLIC, "a");
    fake.delete(PUBLIC_ID);
    fake.preload(PRIVATE, PRIVATE_ID);
    await writeFile(join(dir, "pulling", recordFileName(PRIVATE)), JSON.stringify(pullIntent(PRIVATE)));
    await writeFile(join(dir, "pulling", recordFileName("broken")), "{not json");
    logs = [];
    await start();
    const interrupted = entry(/a pull was interrupted; the image is recorded without credentials: every pod must show its own/);
    assert.deepEqual([interrupted.level, interrupted.image, interrupted.imageRef], [WARN, PRIVATE, PRIVATE_ID]);
    const unreadable = entry(/an unreadable pull intent was dropped/);
    assert.equal(unreadable.level, WARN);
    assert.equal(unreadable.file, join(dir, "pulling", recordFileName("broken")));
    assert.ok(typeof unreadable.reason === "string" && unreadable.reason.length > 0);
    assert.deepEqual(entry(/records of removed images pruned/).imageRefs, [PUBLIC_ID]);
    assert.ok(!logs.some((l) => /first start/.test(l.msg)), "not the first start");
  });
});

describe("names that are not references, calls without a pod, and keys kept apart", () => {
  const HEX_ID = "a".repeat(64);
  const OTHER = "registry.example.com/private/other:v1";
  const OTHER_ID = `sha256:${"c".repeat(64)}`;

  test("an ImageStatus by a bare image ID is absent for a pod even when its secrets hold the recorded credential; no pull is awaited", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    view.candidates = [{ pod: "team/b", credential: SAME }];
    const byId = {
      ...fake.call("ImageStatus", imageStatusRequest(HEX_ID, "b")),
      forward: () => fake.call("ImageStatus", encodeImageStatusRequestFor(PRIVATE, {})).forward(),
    };
    assert.equal(decodeImageStatusResponse(await proxy.handle(byId)), undefined);
    assert.equal(await counted("imprimatur_node_image_checks_total", { result: "must-pull" }), 1);
    assert.deepEqual(view.asked, []);
    const pullById = {
      ...fake.call("PullImage", pullImageRequest(HEX_ID, "b", SAME)),
      forward: () => Promise.reject(Object.assign(new Error("not found"), { code: 5, details: "not found" })),
    };
    await assert.rejects(proxy.handle(pullById), /not found/);
    assert.equal(await counted("imprimatur_node_reuse_denied_total"), 0, "nothing was hidden under that name");
  });

  test("a pull by a bare image ID is not recorded (it names no repository)", async () => {
    fake.preload(PRIVATE, PRIVATE_ID);
    await start();
    const pullById = {
      ...fake.call("PullImage", encodePullImageRequest({ image: HEX_ID, auth: GOOD })),
      forward: async () => encodePullImageResponse(PRIVATE_ID),
    };
    await proxy.handle(pullById);
    await proxy.stop();
    assert.equal(store.get(PRIVATE_ID).state, "none");
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
  });

  test("a pull without a pod (crictl) is recorded for nobody in particular", async () => {
    await start();
    await proxy.handle(fake.call("PullImage", encodePullImageRequest({ image: PRIVATE, auth: GOOD })));
    await proxy.stop();
    const read = store.get(PRIVATE_ID);
    assert.ok(read.state === "ok");
    assert.deepEqual(read.record.credentialMapping["registry.example.com/private/app"]?.credentials?.[0]?.presentedBy, [{ namespace: "", name: "", uid: "" }]);
  });

  test("a name the runtime lists that is no reference does not spoil the first start's list", async () => {
    fake.preload(PUBLIC, PUBLIC_ID);
    fake.addRawName(PUBLIC_ID, "Not A Name");
    await start();
    await start();
    assert.equal(await status(PUBLIC, "a"), PUBLIC_ID, "preloaded, after a restart too");
  });

  test("a report of absence to one pod is not another pod's", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    assert.equal(await status(PRIVATE, "b"), undefined);
    view.policies.set("uid-c", "IfNotPresent");
    const before = fake.registryPulls;
    await pull(PRIVATE, "c", SAME);
    assert.equal(fake.registryPulls, before + 1, "c was told nothing: its pull goes to the registry");
  });

  test("a pod that pulled one image has not shown credentials for another", async () => {
    fake.publish(OTHER, OTHER_ID, GOOD);
    await start();
    await pull(PRIVATE, "a", GOOD);
    await pull(OTHER, "b", GOOD);
    assert.equal(await status(OTHER, "a"), undefined);
    assert.equal(await status(PRIVATE, "b"), undefined);
  });

  test("RemoveImage of an image that is not on the node is forwarded", async () => {
    await start();
    await proxy.handle(fake.call("RemoveImage", encodeRemoveImageRequest(PRIVATE)));
    assert.deepEqual(fake.forwarded, [{ method: "RemoveImage", image: PRIVATE }]);
  });

  test("a record removed since the report of absence: forwarded", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    assert.equal(await status(PRIVATE, "b"), undefined);
    view.policies.set("uid-b", "IfNotPresent");
    await store.remove(PRIVATE_ID);
    const before = fake.registryPulls;
    assert.equal(await pull(PRIVATE, "b", SAME), PRIVATE_ID);
    assert.equal(fake.registryPulls, before + 1);
  });

  test("a record that cannot be written after an answer from the records is logged", async () => {
    await start({ withView: true });
    await pull(PRIVATE, "a", GOOD);
    assert.equal(await status(PRIVATE, "b"), undefined);
    view.policies.set("uid-b", "IfNotPresent");
    await rm(join(dir, "pulled"), { recursive: true });
    assert.equal(await pull(PRIVATE, "b", SAME), PRIVATE_ID);
    const failed = logs.filter((l) => /writing a pull record failed; pods will have to show credentials again/.test(l.msg));
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.level, 50);
    assert.ok(failed[0]!.err, "the error is logged");
  });

  test("by default pruning waits minutes, and nothing pruned is not logged", async () => {
    await start();
    await pull(PUBLIC, "a");
    await start();
    fake.delete(PUBLIC_ID);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(store.get(PUBLIC_ID).state, "ok");
    assert.ok(!logs.some((l) => /pruned/.test(l.msg)));
  });
});
