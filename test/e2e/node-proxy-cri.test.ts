// `imprimatur node-proxy` spoken to directly over CRI (runtime.v1, and runtime.v1alpha2 for the same decisions),
// in front of a real containerd 1.6 pulling from a real docker-registry with htpasswd auth (private) and one
// without auth (public). The kubelet's calls are reproduced as it makes them: ImageStatus with the pod's
// annotations (kubernetes.io/config.source and config.seen), PullImage with the AuthConfig and the sandbox.
// The full path through a real kubelet is test/e2e/node-proxy-kubelet.test.ts. Pulls in flight (containerd killed
// under one, a caller's deadline or cancel, a slow registry) go through a relay in front of the public registry
// that holds chosen blobs (test/support/tampering-proxy.ts).
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import { pullIntent } from "../../src/core/pull-verification/pull-records.ts";
import { encodeImageStatusRequestFor, encodePullImageRequest, encodeRemoveImageRequest, LIST_ALL_IMAGES_REQUEST } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";
import { recordFileName } from "../../src/node/record-store.ts";
import { imprimatur as runCli } from "../support/cli-process.ts";
import { criPull, criPullError, criStatus, imageStatusRequest, kubeletSandbox, pullImageRequest, type KubeletAuth } from "../support/kubelet-cri.ts";
import { startNodeProxy, type NodeProxyProcess } from "../support/node-proxy-process.ts";
import { startNodeRuntime, type NodeRuntime } from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { startTamperingProxy, type TamperingProxy } from "../support/tampering-proxy.ts";
import { teardown } from "../support/teardown.ts";

let dir: string;
let priv: TestRegistry;
let pub: TestRegistry;
let node: NodeRuntime;
let containerd: RuntimeImageClient;
const proxies: NodeProxyProcess[] = [];
const clients: RuntimeImageClient[] = [];
let images: { private: string; private2: string; public: string };
/** The public registry through the relay, which holds blobs the tests name. */
let relay: TamperingProxy;
/** Images pulled only through the relay, each once (their blobs are nowhere else), and each one's layer digest. */
const SLOW_TAGS = ["killed", "killed-direct", "deadline", "long"] as const;
let slow: Record<(typeof SLOW_TAGS)[number], { image: string; layer: string }>;
/** Layer digest → what its GET through the relay waits for before it is forwarded. */
const holds = new Map<string, () => Promise<void>>();

const status = criStatus;
const pull = criPull;
const pullError = criPullError;

async function proxy(stateDir: string, args: string[] = []): Promise<{ p: NodeProxyProcess; client: RuntimeImageClient }> {
  const p = await startNodeProxy({ dir, stateDir, runtimeEndpoint: node.containerdEndpoint, args });
  proxies.push(p);
  const client = new RuntimeImageClient(p.endpoint);
  clients.push(client);
  return { p, client };
}

async function records(stateDir: string): Promise<{ code: number; stdout: string; json: any }> {
  const text = await runCli(["node-records", "--state-dir", stateDir]);
  const json = await runCli(["node-records", "--state-dir", stateDir, "-o", "json"]);
  return { code: text.code ?? -1, stdout: text.stdout, json: JSON.parse(json.stdout) };
}

const good = (): KubeletAuth => ({ username: priv.username, password: priv.password });

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-node-proxy-"));
  [priv, pub] = await Promise.all([startRegistry({ auth: "htpasswd" }), startRegistry({ auth: "none" })]);
  const built = buildRunnableImage({ tag: "v1", seed: "node-proxy-private-1" });
  buildRunnableImage({ tag: "v2", seed: "node-proxy-private-2", dir: built.layoutDir });
  buildRunnableImage({ tag: "tool", seed: "node-proxy-public-1", dir: built.layoutDir });
  const layers = SLOW_TAGS.map((tag) => buildRunnableImage({ tag, seed: `node-proxy-slow-${tag}`, dir: built.layoutDir }).layerDigest);
  try {
    await priv.push(built.layoutDir, "v1", "private/app", "v1");
    await priv.push(built.layoutDir, "v2", "private/app", "v2");
    await pub.push(built.layoutDir, "tool", "public/tool", "v1");
    for (const tag of SLOW_TAGS) await pub.push(built.layoutDir, tag, "public/slow", tag);
  } finally {
    await rm(built.layoutDir, { recursive: true, force: true });
  }
  images = { private: `${priv.host}/private/app:v1`, private2: `${priv.host}/private/app:v2`, public: `${pub.host}/public/tool:v1` };
  relay = await startTamperingProxy({ upstream: pub.url, upstreamCa: pub.caPem });
  relay.hold = ({ method, path }) => (method === "GET" ? holds.get(path.slice(path.lastIndexOf("/") + 1))?.() : undefined);
  const relayCa = join(dir, "relay-ca.crt");
  await writeFile(relayCa, relay.caPem);
  slow = Object.fromEntries(SLOW_TAGS.map((tag, i) => [tag, { image: `${relay.host}/public/slow:${tag}`, layer: layers[i]! }])) as typeof slow;
  node = await startNodeRuntime({
    registries: [...[priv, pub].map((r) => ({ host: r.host, caFile: r.caFile })), { host: relay.host, caFile: relayCa }],
  });
  containerd = new RuntimeImageClient(node.containerdEndpoint);
});

after(() =>
  teardown([
    ...clients.map((c) => () => c.close()),
    () => containerd?.close(),
    ...proxies.map((p) => () => p.stop()),
    () => node?.stop(),
    () => relay?.stop(),
    () => priv?.stop(),
    () => pub?.stop(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

describe("CRI runtime.v1, straight to the proxy", () => {
  const state = () => join(dir, "state-main");

  test("a pull records the credential; a pod that has not shown it is told the image is absent, and the registry decides its pull", async () => {
    const { p, client } = await proxy(state());
    assert.equal(await status(client, images.private, "a"), undefined, "not on the node yet");
    const ref = await pull(client, images.private, "a", good());
    assert.match(ref, /^sha256:[0-9a-f]{64}$/);
    assert.equal((await status(client, images.private, "a"))?.id, ref, "the pod that pulled it sees it");
    assert.equal((await status(client, images.private))?.id, ref, "a call that is not a pod's pull decision gets the truth");
    assert.equal(await status(client, images.private, "b"), undefined, "another pod must show credentials first");

    // Without credentials the pull goes to the registry, which refuses; the runtime's error comes back unchanged.
    const refused = await pullError(client, images.private, "b");
    const direct = await containerd
      .call("runtime.v1", "PullImage", encodePullImageRequest({ image: images.private, sandbox: kubeletSandbox("b") }), { deadline: Date.now() + 60_000 })
      .then(
        () => assert.fail("containerd pulled without credentials"),
        (e: grpc.ServiceError) => e,
      );
    assert.equal(refused.code, direct.code);
    assert.equal(refused.details, direct.details);
    assert.match(refused.details, /401|unauthorized/i);
    assert.match(await p.log(), /"name":"b".*pod refused an image already on the node: the registry did not accept its credentials/);
    assert.equal(await p.metric("imprimatur_node_reuse_denied_total"), 1);

    // A wrong password is refused by the registry too.
    assert.equal(await status(client, images.private, "c"), undefined);
    assert.match((await pullError(client, images.private, "c", { username: priv.username, password: "wrong" })).details, /401|unauthorized/i);

    // The same credentials from another Secret, spelled as docker config's base64 "auth": the registry accepts them.
    // Without the API's view the proxy cannot tell an imagePullPolicy: Always pull, so none is answered from the
    // records (test/unit/node/node-image-proxy.test.ts has the answers with the view).
    assert.equal(await status(client, images.private, "d"), undefined);
    const before = await p.metric('imprimatur_node_pulls_total{result="forwarded-ok"}');
    const again = await pull(client, images.private, "d", { auth: Buffer.from(`${priv.username}:${priv.password}`).toString("base64") });
    assert.equal(again, ref);
    assert.equal(await p.metric('imprimatur_node_pulls_total{result="answered-from-records"}'), 0);
    assert.equal(await p.metric('imprimatur_node_pulls_total{result="forwarded-ok"}'), before + 1, "the pull went to the registry");
    assert.equal((await status(client, images.private, "d"))?.id, ref);
    assert.equal(await p.metric('imprimatur_node_image_checks_total{result="must-pull"}'), 3);

    const listed = await records(state());
    assert.equal(listed.code, 0, listed.stdout);
    const row = listed.json.images.find((r: { repository?: string }) => r.repository === `${priv.host}/private/app`);
    assert.equal(row.access, "credentials");
    assert.equal(row.credentials.length, 1, "one credential, however it was spelled");
    assert.deepEqual(row.credentials[0].presentedBy, ["team/a", "team/d"]);
    assert.doesNotMatch(await readFile(join(state(), "pulled", recordFileName(ref)), "utf8"), new RegExp(priv.password), "no secret on disk");
  });

  test("runtime.v1alpha2 (kubelet ≤ 1.25) gets the same decisions", async () => {
    const client = clients.at(-1)!;
    assert.equal(await status(client, images.private, "e", "runtime.v1alpha2"), undefined);
    const ref = await pull(client, images.private, "e", good(), "runtime.v1alpha2");
    assert.equal((await status(client, images.private, "e", "runtime.v1alpha2"))?.id, ref);
  });

  test("calls the proxy does not change are forwarded byte for byte, fields it does not declare included", async () => {
    const client = clients.at(-1)!;
    // containerd lists images in no fixed order: each image's bytes are compared, whatever the order.
    const through = await client.call("runtime.v1", "ListImages", LIST_ALL_IMAGES_REQUEST);
    const direct = await containerd.call("runtime.v1", "ListImages", LIST_ALL_IMAGES_REQUEST);
    assert.ok(through.length > 0);
    assert.deepEqual(repeatedField1(through).sort(), repeatedField1(direct).sort());
    const truth = await client.call("runtime.v1", "ImageStatus", encodeImageStatusRequestFor(images.private, {}));
    assert.deepEqual(truth, await containerd.call("runtime.v1", "ImageStatus", encodeImageStatusRequestFor(images.private, {})));
    await client.call("runtime.v1", "ImageFsInfo", Buffer.alloc(0));
  });

  test("a malformed request is INVALID_ARGUMENT with the reason; the proxy keeps serving", async () => {
    const client = clients.at(-1)!;
    const bad = await client.call("runtime.v1", "ImageStatus", Buffer.from([0x0a, 0xff, 0xff])).then(
      () => assert.fail("accepted"),
      (e: grpc.ServiceError) => e,
    );
    assert.equal(bad.code, grpc.status.INVALID_ARGUMENT);
    assert.match(bad.details, /malformed ImageStatusRequest/);
    assert.ok(await status(client, images.private));
  });

  test("a public image pulled without credentials may be used by every pod", async () => {
    const client = clients.at(-1)!;
    const ref = await pull(client, images.public, "f");
    assert.equal((await status(client, images.public, "g"))?.id, ref);
    const row = (await records(state())).json.images.find((r: { repository?: string }) => r.repository === `${pub.host}/public/tool`);
    assert.equal(row.access, "all-pods");
  });

  test("kill -9 and a restart: the records survive; without credentials still refused, with them pulled", async () => {
    const old = proxies.at(-1)!;
    await old.kill9();
    const { p, client } = await proxy(state());
    assert.equal(await status(client, images.private, "h"), undefined);
    assert.match((await pullError(client, images.private, "h")).details, /401|unauthorized/i);
    assert.equal(await status(client, images.private, "i"), undefined);
    await pull(client, images.private, "i", good());
    assert.equal(await p.metric('imprimatur_node_pulls_total{result="forwarded-ok"}'), 1);
    assert.equal((await status(client, images.private, "i"))?.id, (await status(containerd, images.private))!.id);
    assert.ok(await status(client, images.public, "j"), "the anonymous record survived too");
  });

  test("a corrupt record means verification, never admission", async () => {
    await proxies.at(-1)!.stop();
    const publicRef = (await status(containerd, images.public))!.id;
    await writeFile(join(state(), "pulled", recordFileName(publicRef)), '{"apiVersion":"imprimatur.dev/v1alpha1","kind":"ImagePulledRecord","imageRef":1}');
    const { p, client } = await proxy(state());
    assert.equal(await status(client, images.public, "k"), undefined);
    assert.equal(await p.metric('imprimatur_node_image_checks_total{result="unreadable-record"}'), 1);
    const listed = await records(state());
    assert.equal(listed.code, 1, "node-records reports the unreadable record");
    assert.match(listed.stdout, /cannot be read .*pods must show credentials/);
    // Pulling again (the public registry lets anyone) writes a good record in its place.
    await pull(client, images.public, "k");
    assert.ok(await status(client, images.public, "l"));
  });

  test("an intent left by a crash becomes a record naming nobody: every pod must show credentials", async () => {
    await proxies.at(-1)!.stop();
    const ref = (await status(containerd, images.private))!.id;
    await rm(join(state(), "pulled", recordFileName(ref)));
    await writeFile(join(state(), "pulling", recordFileName(images.private)), JSON.stringify(pullIntent(images.private)), { mode: 0o600 });
    const { client } = await proxy(state());
    const listed = await records(state());
    assert.match(listed.stdout, new RegExp(`${ref}: nobody yet`));
    assert.deepEqual(listed.json.pullsInProgress, []);
    assert.equal(await status(client, images.private, "m"), undefined);
    await pull(client, images.private, "m", good());
    assert.ok(await status(client, images.private, "m"));
  });

  test("RemoveImage through the proxy prunes the image's record", async () => {
    const client = clients.at(-1)!;
    const ref = (await status(client, images.public))!.id;
    await client.call("runtime.v1", "RemoveImage", encodeRemoveImageRequest(images.public));
    assert.equal(await status(client, images.public), undefined);
    const listed = await records(state());
    assert.ok(!listed.json.images.some((r: { imageRef: string }) => r.imageRef === ref), listed.stdout);
  });

  test("containerd gone and back under the proxy: calls meanwhile fail at once with UNAVAILABLE, and the proxy serves again by itself", async () => {
    await proxies.at(-1)!.stop();
    const { p, client } = await proxy(state());
    // Pod m shows credentials for the private image; another pod has not.
    await pull(client, images.private, "m", good());
    const before = await status(client, images.private, "m");
    assert.ok(before, "the private image is there for pod m");
    let downResult: grpc.ServiceError | undefined;
    let downMs: number | undefined;
    let restarted: Promise<void> | undefined;
    try {
      // Killed, as a crash leaves it; back after 3 s with the same root and state.
      restarted = node.restartContainerd({ kill: true, downMs: 3_000 });
      await new Promise((r) => setTimeout(r, 500));
      const started = Date.now();
      try {
        await client.call("runtime.v1", "ImageStatus", imageStatusRequest(images.private, "m"), { deadline: Date.now() + 20_000 });
      } catch (e) {
        downResult = e as grpc.ServiceError;
      }
      downMs = Date.now() - started;
    } finally {
      await restarted;
    }
    assert.ok(downResult, "a call while containerd is down does not succeed");
    assert.equal(downResult.code, grpc.status.UNAVAILABLE, downResult.details);
    assert.ok(downMs !== undefined && downMs < 5_000, `answered without waiting for its deadline (${downMs} ms)`);
    // Back: the proxy reconnects on its own (gRPC's backoff), no restart of it; its decisions are the same.
    let answered: Awaited<ReturnType<typeof status>> | "failing" = "failing";
    for (let i = 0; i < 60 && answered === "failing"; i++) {
      answered = await status(client, images.private, "m").catch(() => "failing" as const);
      if (answered === "failing") await new Promise((r) => setTimeout(r, 500));
    }
    assert.notEqual(answered, "failing", "the proxy serves again within 30 s of containerd's return");
    assert.equal(answered === "failing" ? undefined : answered?.id, before.id, "the same image for pod m, from its record");
    assert.equal(await status(client, images.private, "never-showed-credentials"), undefined, "and other pods still need credentials");
    assert.doesNotThrow(() => process.kill(p.pid, 0), "the proxy never exited");
  });
});

describe("verification policies, with images preloaded before the first start", () => {
  test("NeverVerifyPreloadedImages, AlwaysVerify, NeverVerifyAllowlistedImages and NeverVerify", async () => {
    for (const p of proxies) await p.stop();
    const state = join(dir, "state-policies");
    // On the node now: the private v1 (pulled above). The first start records it as preloaded.
    const preloadedRef = (await status(containerd, images.private))!.id;
    let { client } = await proxy(state);
    assert.equal((await status(client, images.private, "n"))?.id, preloadedRef, "default: a preloaded image needs no credentials");
    const pulledRef = await pull(client, images.private2, "n", good());
    assert.equal(await status(client, images.private2, "o"), undefined, "an image pulled through the proxy with credentials does");

    const restart = async (args: string[]) => {
      await proxies.at(-1)!.stop();
      ({ client } = await proxy(state, args));
    };
    await restart(["--verification-policy", "AlwaysVerify"]);
    assert.equal(await status(client, images.private, "p"), undefined, "AlwaysVerify: preloaded too");

    await restart(["--verification-policy", "NeverVerifyAllowlistedImages", "--preloaded-allowlist", `${priv.host}/private/*`]);
    assert.equal((await status(client, images.private, "q"))?.id, preloadedRef, "preloaded and allowlisted");
    assert.equal(await status(client, images.private2, "q"), undefined, "allowlisted but pulled with credentials");
    await restart(["--verification-policy", "NeverVerifyAllowlistedImages", "--preloaded-allowlist", `${priv.host}/other`]);
    assert.equal(await status(client, images.private, "r"), undefined, "preloaded, not allowlisted");

    await restart(["--verification-policy", "NeverVerify"]);
    assert.equal((await status(client, images.private2, "s"))?.id, pulledRef);
  });

  test("usage errors are exit 2 with the reason", async () => {
    const r = await runCli(["node-proxy", "--listen", "unix:///tmp/x.sock", "--runtime-endpoint", "unix:///tmp/y.sock", "--verification-policy", "Sometimes"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--verification-policy must be one of NeverVerify, NeverVerifyPreloadedImages/);
    const allow = await runCli(["node-proxy", "--listen", "unix:///tmp/x.sock", "--runtime-endpoint", "unix:///tmp/y.sock", "--preloaded-allowlist", "alpine"]);
    assert.match(allow.stderr, /applies only with --verification-policy NeverVerifyAllowlistedImages/);
  });
});

describe("pulls in flight: containerd killed under one, the caller's deadline or cancel, a slow registry", () => {
  const state = () => join(dir, "state-in-flight");
  const pulling = () => readdir(join(state(), "pulling"));
  const failed = (p: NodeProxyProcess) => p.metric('imprimatur_node_pulls_total{result="forwarded-failed"}');
  const pullCalls = (p: NodeProxyProcess, code: string) => p.metric(`imprimatur_node_cri_calls_total{method="PullImage",code="${code}"}`);
  /** The relay's requests for a layer since `from`: held there, and whether the client (containerd) hung up. */
  const layerRequests = (layer: string, from: number) => relay.requests.slice(from).filter((r) => r.path.endsWith(`/blobs/${layer}`));

  async function fresh(): Promise<{ p: NodeProxyProcess; client: RuntimeImageClient }> {
    for (const p of proxies) await p.stop();
    return proxy(state());
  }

  test("containerd killed under a pull in flight: UNAVAILABLE back at once as a direct caller gets it, the intent removed, and the same pull succeeds once containerd is back, the proxy not restarted", async () => {
    const { p, client } = await fresh();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    for (const s of [slow.killed, slow["killed-direct"]]) holds.set(s.layer, () => released);
    const from = relay.requests.length;
    const request = (s: { image: string }) => pullImageRequest(s.image, "in-flight");
    const failure = (call: Promise<Buffer>) =>
      call.then(
        () => assert.fail("the pull succeeded"),
        (e: grpc.ServiceError) => e,
      );
    // The same pull through the proxy, and another straight to containerd, both waiting on their layer.
    const through = failure(client.call("runtime.v1", "PullImage", request(slow.killed), { deadline: Date.now() + 60_000 }));
    const direct = failure(containerd.call("runtime.v1", "PullImage", request(slow["killed-direct"]), { deadline: Date.now() + 60_000 }));
    let restarted: Promise<void> | undefined;
    let back = false;
    try {
      await until("both pulls wait on their layer at the relay", () =>
        [slow.killed, slow["killed-direct"]].every((s) => layerRequests(s.layer, from).length > 0),
      );
      assert.equal(await p.metric("imprimatur_node_pull_intents"), 1, "the pull's intent is written while it is in flight");
      assert.deepEqual(await pulling(), [recordFileName(slow.killed.image)]);
      // Killed, as a crash leaves it; back after 3 s with the same root and state.
      restarted = node.restartContainerd({ kill: true, downMs: 3_000 }).then(() => void (back = true));
      const [err, directErr] = await Promise.all([through, direct]);
      assert.equal(back, false, "the caller is answered while containerd is still down, not at its deadline");
      assert.equal(err.code, grpc.status.UNAVAILABLE, err.details);
      assert.equal(err.code, directErr.code);
      assert.equal(err.details, directErr.details, "the error a direct caller of containerd gets");
    } finally {
      release();
      await restarted;
      holds.clear();
    }
    assert.ok(
      [slow.killed, slow["killed-direct"]].every((s) => layerRequests(s.layer, from).every((r) => r.closedEarly)),
      "containerd's fetches died with it",
    );
    assert.deepEqual(await pulling(), [], "no intent left");
    assert.equal(await p.metric("imprimatur_node_pull_intents"), 0);
    assert.equal(await failed(p), 1);
    assert.equal(await pullCalls(p, "UNAVAILABLE"), 1);

    // Containerd is back: the kubelet's retry of the same pull succeeds through the same proxy (once its channel
    // has reconnected, gRPC's backoff: meanwhile the retry fails at once with UNAVAILABLE, as above).
    let ref: string | undefined;
    for (let i = 0; i < 60 && ref === undefined; i++) {
      ref = await pull(client, slow.killed.image, "in-flight").catch((e: grpc.ServiceError) => {
        if (e.code !== grpc.status.UNAVAILABLE) throw e;
        return undefined;
      });
      if (ref === undefined) await sleep(500);
    }
    assert.ok(ref, "the pull succeeds within 30 s of containerd's return");
    assert.equal((await status(containerd, slow.killed.image))?.id, ref);
    await until("the pull's intent is removed once its record is written", async () => (await pulling()).length === 0);
    assert.equal((await status(client, slow.killed.image, "anyone"))?.id, ref, "recorded: pulled anonymously, every pod may use it");
    assert.doesNotThrow(() => process.kill(p.pid, 0), "the proxy never exited");
  });

  test("a slow PullImage: forwarded with the caller's deadline and cancellation, which reach containerd; the proxy adds no timeout of its own", async () => {
    const { p, client } = await fresh();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    holds.set(slow.deadline.layer, () => released);
    try {
      // A caller's deadline 3 s away; the layer never comes.
      let from = relay.requests.length;
      const deadline = Date.now() + 3_000;
      const late = await client.call("runtime.v1", "PullImage", pullImageRequest(slow.deadline.image, "slow"), { deadline }).then(
        () => assert.fail("the pull succeeded"),
        (e: grpc.ServiceError) => e,
      );
      const answeredAt = Date.now();
      assert.equal(late.code, grpc.status.DEADLINE_EXCEEDED, late.details);
      assert.ok(answeredAt - deadline < 1_000, `answered at its deadline, not later (${answeredAt - deadline} ms after it)`);
      assert.ok(layerRequests(slow.deadline.layer, from).length > 0, "the pull was fetching its layer when the deadline came");
      await until("containerd gives up the fetch: the deadline reached it", () => layerRequests(slow.deadline.layer, from).every((r) => r.closedEarly));
      assert.equal(await pullCalls(p, "DEADLINE_EXCEEDED"), 1, "counted as the caller saw it");

      // A caller that cancels (the kubelet's pod deleted meanwhile), with no deadline near.
      from = relay.requests.length;
      const cancel = new AbortController();
      const cancelled = client
        .call("runtime.v1", "PullImage", pullImageRequest(slow.deadline.image, "slow"), { deadline: Date.now() + 60_000, signal: cancel.signal })
        .then(
          () => assert.fail("the pull succeeded"),
          (e: grpc.ServiceError) => e,
        );
      await until("the pull waits on its layer", () => layerRequests(slow.deadline.layer, from).length > 0);
      cancel.abort();
      assert.equal((await cancelled).code, grpc.status.CANCELLED);
      await until("containerd gives up the fetch: the cancel reached it", () => layerRequests(slow.deadline.layer, from).every((r) => r.closedEarly));
      assert.equal(await pullCalls(p, "CANCELLED"), 1);
    } finally {
      release();
    }
    assert.equal(await status(containerd, slow.deadline.image), undefined, "containerd has no image from the pulls that ended");
    assert.deepEqual(await pulling(), [], "no intent left");
    assert.equal(await p.metric("imprimatur_node_pull_intents"), 0);
    assert.equal(await failed(p), 2);

    // A pull slower than any timeout of the proxy's own (30 s, for its own calls to containerd), within the caller's.
    holds.set(slow.long.layer, () => sleep(31_000));
    try {
      const started = Date.now();
      const ref = await pull(client, slow.long.image, "slow");
      assert.ok(Date.now() - started > 30_000, "the pull took longer than 30 s");
      assert.equal((await status(containerd, slow.long.image))?.id, ref);
    } finally {
      holds.clear();
    }
    assert.equal(await p.metric('imprimatur_node_pulls_total{result="forwarded-ok"}'), 1);
    await until("the pull's intent is removed once its record is written", async () => (await pulling()).length === 0);
  });
});

/** Polls `condition` every 100 ms; fails naming `what` when it does not hold within 20 s. */
async function until(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  for (const end = Date.now() + 20_000; !(await condition()); await sleep(100)) if (Date.now() > end) assert.fail(`${what}: not within 20 s`);
}

/** The entries of a message made only of field 1, length-delimited (ListImagesResponse.images), as hex. */
function repeatedField1(message: Buffer): string[] {
  const entries: string[] = [];
  let at = 0;
  while (at < message.length) {
    assert.equal(message[at], 0x0a, "field 1, length-delimited");
    at++;
    let length = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = message[at++]!;
      length += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) break;
    }
    entries.push(message.subarray(at, at + length).toString("hex"));
    at += length;
  }
  return entries;
}
