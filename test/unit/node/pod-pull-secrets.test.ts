// The node proxy's view of the node's pods, against a fake kube-apiserver on loopback (plain HTTP, the endpoints
// the view reads — the list of the node's pods, one pod, Secrets — and service accounts, which it must not read; a
// fake because a test must make the API refuse, stall and answer with chosen pods on cue; the reads against a real
// apiserver are test/e2e/node-proxy-api-reads.test.ts): which pods a call may be for, and their pull secrets'
// credential hashes; a pull's policy from its own pod; and, through the proxy (NodeImageProxy over a fake runtime),
// that a pod whose annotations in the API differ from the kubelet's call cannot leave another pod's secrets to speak
// for it.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import pino from "pino";
import { parseImageReference, type ImageReference } from "../../../src/core/image-reference.ts";
import { credentialHash } from "../../../src/core/pull-verification/credential-hash.ts";
import { decodeImageStatusResponse, decodePullImageResponse, encodeImageStatusRequestFor, encodePullImageRequest } from "../../../src/cri/cri-messages.ts";
import { KubeClient } from "../../../src/kube/kube-client.ts";
import type { NodeImageProxy } from "../../../src/node/node-image-proxy.ts";
import { PodPullSecrets } from "../../../src/node/pod-pull-secrets.ts";
import { RecordStore } from "../../../src/node/record-store.ts";
import { inProcessNodeProxy } from "../../support/in-process-node-proxy.ts";
import { FakeImageService } from "./fake-image-service.ts";

const KEY = Buffer.alloc(32, 7);
const REGISTRY = "registry.example.com:5000";

interface FakePod {
  namespace: string;
  name: string;
  uid?: string;
  annotations?: Record<string, string>;
  spec: Record<string, unknown>;
}

let server: Server;
let url: string;
let pods: FakePod[] = [];
let podLists = 0;
/** GETs of one pod (a pull's). */
let podGets = 0;
/** GETs of one pod the fake API refuses (403) before it answers again. */
let refusedGets = 0;
let listDelayMs = 0;
/** Pod lists and Secret reads the fake API refuses (403) before it answers again. */
let refusedLists = 0;
const refusedSecrets = new Set<string>();
/** A pull secret's docker config entry for REGISTRY: a username and password, or the entry's fields as written. */
const secrets = new Map<string, { username: string; password: string } | { entry: Record<string, string> }>();
/** Service accounts' imagePullSecrets, and how often the fake API was asked for a service account. */
const serviceAccounts = new Map<string, string[]>();
let serviceAccountReads = 0;
/** How often the fake API was asked for a Secret. */
let secretReads = 0;

function dockerConfigSecret(namespace: string, name: string, c: { username: string; password: string } | { entry: Record<string, string> }) {
  const entry = "entry" in c ? c.entry : { username: c.username, password: c.password, auth: Buffer.from(`${c.username}:${c.password}`).toString("base64") };
  const auths = { [REGISTRY]: entry };
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "kubernetes.io/dockerconfigjson",
    metadata: { namespace, name },
    data: { ".dockerconfigjson": Buffer.from(JSON.stringify({ auths })).toString("base64") },
  };
}

before(async () => {
  server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    const json = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    // Every read of pods is consistent: a resourceVersion would let the apiserver answer from its cache.
    if (u.pathname.includes("/pods")) assert.equal(u.searchParams.get("resourceVersion"), null);
    const onePod = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(u.pathname);
    if (onePod) {
      podGets++;
      if (refusedGets > 0) {
        refusedGets--;
        return json(403, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "Forbidden", code: 403 });
      }
      const p = pods.find((q) => q.namespace === onePod[1] && q.name === onePod[2]);
      const body = p
        ? {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { namespace: p.namespace, name: p.name, uid: p.uid ?? `uid-${p.name}` },
            spec: { nodeName: "node1", ...p.spec },
          }
        : { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 };
      setTimeout(() => json(p ? 200 : 404, body), listDelayMs);
      return;
    }
    if (u.pathname === "/api/v1/pods") {
      assert.equal(u.searchParams.get("fieldSelector"), "spec.nodeName=node1");
      podLists++;
      if (refusedLists > 0) {
        refusedLists--;
        return json(403, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "Forbidden", code: 403 });
      }
      // The list as it is when the request arrives.
      const items = pods.map((p) => ({
        metadata: { namespace: p.namespace, name: p.name, uid: p.uid ?? `uid-${p.name}`, ...(p.annotations ? { annotations: p.annotations } : {}) },
        spec: { nodeName: "node1", ...p.spec },
      }));
      setTimeout(() => json(200, { apiVersion: "v1", kind: "PodList", metadata: {}, items }), listDelayMs);
      return;
    }
    const sa = /^\/api\/v1\/namespaces\/([^/]+)\/serviceaccounts\/([^/]+)$/.exec(u.pathname);
    if (sa) serviceAccountReads++;
    const accountSecrets = sa ? serviceAccounts.get(`${sa[1]}/${sa[2]}`) : undefined;
    if (sa && accountSecrets) {
      return json(200, {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { namespace: sa[1], name: sa[2] },
        imagePullSecrets: accountSecrets.map((name) => ({ name })),
      });
    }
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/secrets\/([^/]+)$/.exec(u.pathname);
    if (m) secretReads++;
    if (m && refusedSecrets.has(`${m[1]}/${m[2]}`)) return json(403, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "Forbidden", code: 403 });
    const c = m ? secrets.get(`${m[1]}/${m[2]}`) : undefined;
    if (m && c) return json(200, dockerConfigSecret(m[1]!, m[2]!, c));
    json(404, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => server.close());

beforeEach(() => {
  pods = [];
  podLists = 0;
  podGets = 0;
  refusedGets = 0;
  listDelayMs = 0;
  refusedLists = 0;
  refusedSecrets.clear();
  secrets.clear();
  serviceAccounts.clear();
  serviceAccountReads = 0;
  secretReads = 0;
});

/** Warnings the view logged, as "message: field=value" lines of the fields that name what failed. */
let warnings: string[] = [];
/** Debug lines the view logged (with `view("debug")`), as "message: object". */
let debugLines: string[] = [];

function view(level: "warn" | "debug" = "warn", key: Buffer = KEY): PodPullSecrets {
  const kube = new KubeClient({ server: url, insecureSkipTlsVerify: false, namespace: "default", origin: "test", token: "t" });
  warnings = [];
  debugLines = [];
  const logger = pino(
    { level },
    {
      write: (line: string) => {
        const {
          level: at,
          msg,
          pods: who,
          image,
          err,
          object,
        } = JSON.parse(line) as {
          level: number;
          msg: string;
          pods?: string[];
          image?: string;
          err?: string;
          object?: string;
        };
        if (at < 40) return void debugLines.push(`${msg}: ${object}`);
        warnings.push(`${msg}: ${JSON.stringify({ pods: who, image, err: err?.replace(/\s.*/s, "") })}`);
      },
    },
  );
  return new PodPullSecrets({ kube, nodeName: "node1", key, logger });
}

const ref = (image: string): ImageReference => {
  const parsed = parseImageReference(image);
  assert.ok(parsed.ok);
  return parsed.ref;
};
const hashOf = (c: { username: string; password: string }) => credentialHash(KEY, { ...c, auth: "", serverAddress: "", identityToken: "", registryToken: "" });
const container = (image: string, imagePullPolicy = "IfNotPresent") => ({ containers: [{ name: "main", image, imagePullPolicy }] });
const GOOD = { username: "alice", password: "s3cret" };

async function candidates(v: PodPullSecrets, image: string) {
  const arrival = v.arrival();
  const found = await v.credentialHashes(arrival, image, ref(image), Date.now() + 5_000);
  return found?.map((p) => ({ pod: p.pod, covered: p.hashes.includes(hashOf(GOOD)) }));
}

describe("which pods an ImageStatus may be for", () => {
  test("images are compared normalised: the kubelet's :latest matches an untagged name, and both pods are candidates", async () => {
    secrets.set("default/victim-pull", GOOD);
    pods = [
      { namespace: "default", name: "victim", spec: { ...container(`${REGISTRY}/app:latest`), imagePullSecrets: [{ name: "victim-pull" }] } },
      { namespace: "attacker", name: "attacker", spec: container(`${REGISTRY}/app`) },
    ];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/app:latest`), [
      { pod: "default/victim", covered: true },
      { pod: "attacker/attacker", covered: false },
    ]);
  });

  test("an image volume names the image too", async () => {
    pods = [{ namespace: "a", name: "vol", spec: { containers: [], volumes: [{ name: "v", image: { reference: `${REGISTRY}/data:1` } }] } }];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/data:1`), [{ pod: "a/vol", covered: false }]);
  });

  test("a pod created after the last list is seen by a call that arrives after it (no reuse of an older list)", async () => {
    secrets.set("default/victim-pull", GOOD);
    const v = view();
    pods = [{ namespace: "default", name: "victim", spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: "victim-pull" }] } }];
    assert.deepEqual(await candidates(v, `${REGISTRY}/app:v1`), [{ pod: "default/victim", covered: true }]);
    pods.push({ namespace: "attacker", name: "fresh", spec: container(`${REGISTRY}/app:v1`) });
    assert.deepEqual(await candidates(v, `${REGISTRY}/app:v1`), [
      { pod: "default/victim", covered: true },
      { pod: "attacker/fresh", covered: false },
    ]);
  });

  test("calls that arrive while a list is in flight share the next list, which starts after them", async () => {
    const v = view();
    pods = [{ namespace: "a", name: "one", spec: container(`${REGISTRY}/app:v1`) }];
    listDelayMs = 100;
    const first = candidates(v, `${REGISTRY}/app:v1`);
    // Once the first list has reached the API (which answers with the pods as they were then), a pod is added.
    while (podLists === 0) await new Promise((r) => setTimeout(r, 5));
    pods.push({ namespace: "a", name: "two", spec: container(`${REGISTRY}/app:v1`) });
    const [a, b, c] = await Promise.all([first, candidates(v, `${REGISTRY}/app:v1`), candidates(v, `${REGISTRY}/app:v1`)]);
    assert.deepEqual(
      a?.map((p) => p.pod),
      ["a/one"],
    );
    assert.deepEqual(
      b?.map((p) => p.pod),
      ["a/one", "a/two"],
    );
    assert.deepEqual(
      c?.map((p) => p.pod),
      ["a/one", "a/two"],
    );
    assert.equal(podLists, 2);
  });

  test("no list in time: undefined (the proxy then reports the image absent)", async () => {
    pods = [{ namespace: "a", name: "one", spec: container(`${REGISTRY}/app:v1`) }];
    listDelayMs = 500;
    const v = view();
    const arrival = v.arrival();
    assert.equal(await v.credentialHashes(arrival, `${REGISTRY}/app:v1`, ref(`${REGISTRY}/app:v1`), Date.now() + 50), undefined);
  });

  test("a list the API refuses gives undefined, and is not reused: the next call lists again", async () => {
    pods = [{ namespace: "a", name: "one", spec: container(`${REGISTRY}/app:v1`) }];
    refusedLists = 1;
    const v = view();
    assert.equal(await candidates(v, `${REGISTRY}/app:v1`), undefined);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /^cannot list the node's pods; deciding without them: \{"err":"\S+"\}$/);
    assert.deepEqual(await candidates(v, `${REGISTRY}/app:v1`), [{ pod: "a/one", covered: false }]);
    assert.equal(podLists, 2);
  });

  test("pull secrets the API refuses to show give undefined, logged with the pods and the image", async () => {
    secrets.set("a/pull", GOOD);
    refusedSecrets.add("a/pull");
    pods = [{ namespace: "a", name: "one", spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: "pull" }] } }];
    const v = view();
    assert.equal(await candidates(v, `${REGISTRY}/app:v1`), undefined);
    assert.deepEqual(
      warnings.map((w) => w.replace(/"err":"[^"]*"/, '"err":"…"')),
      [`cannot read the pods' pull secrets; deciding without them: {"pods":["a/one"],"image":"${REGISTRY}/app:v1","err":"…"}`],
    );
    refusedSecrets.clear();
  });

  test("a pod's annotations, whatever they are, do not rule it out: every pod on the node naming the image is a candidate", async () => {
    // ImageStatus names no pod, and annotations are the pod author's to write and change: nothing in them can tell
    // which pod called, so a pod that could be the caller always counts.
    pods = [
      { namespace: "a", name: "tagged", annotations: { team: "x" }, spec: container(`${REGISTRY}/app:v1`) },
      { namespace: "a", name: "plain", spec: container(`${REGISTRY}/app:v1`) },
      { namespace: "a", name: "other-image", annotations: { team: "x" }, spec: container(`${REGISTRY}/other:v1`) },
    ];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/app:v1`), [
      { pod: "a/tagged", covered: false },
      { pod: "a/plain", covered: false },
    ]);
    assert.equal(await candidates(view(), `${REGISTRY}/absent:v1`), undefined, "no pod names the image");
  });

  test("up to 110 pods naming the image (the kubelet's default --max-pods) are examined; more are not", async () => {
    secrets.set("a/pull", GOOD);
    const replica = (i: number) => ({ namespace: "a", name: `p${i}`, spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: "pull" }] } });
    pods = Array.from({ length: 110 }, (_, i) => replica(i));
    const found = await candidates(view(), `${REGISTRY}/app:v1`);
    assert.equal(found?.length, 110);
    assert.ok(found.every((p) => p.covered));
    pods.push(replica(110));
    assert.equal(await candidates(view(), `${REGISTRY}/app:v1`), undefined);
  });

  test("Secrets of the same names in two namespaces are each namespace's own", async () => {
    secrets.set("a/pull", GOOD);
    secrets.set("c/pull", { username: "carol", password: "other" });
    const named = (namespace: string, name: string) => ({
      namespace,
      name,
      spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: "pull" }] },
    });
    pods = [named("a", "one"), named("b", "two"), named("a", "three"), named("c", "four")];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/app:v1`), [
      { pod: "a/one", covered: true },
      { pod: "b/two", covered: false },
      { pod: "a/three", covered: true },
      { pod: "c/four", covered: false },
    ]);
  });

  test("pods of one namespace naming other Secrets are judged each by its own; replicas naming the same Secrets read them once", async () => {
    secrets.set("a/pull", GOOD);
    secrets.set("a/other", { username: "carol", password: "other" });
    const named = (name: string, secret: string) => ({
      namespace: "a",
      name,
      spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: secret }] },
    });
    pods = [named("one", "pull"), named("two", "other"), named("three", "pull"), named("four", "pull")];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/app:v1`), [
      { pod: "a/one", covered: true },
      { pod: "a/two", covered: false },
      { pod: "a/three", covered: true },
      { pod: "a/four", covered: true },
    ]);
    assert.equal(secretReads, 2, "a/pull once for its three pods, a/other once");
  });

  // The kubelet writes these itself and keeps its own values whatever the pod's author sets (pkg/kubelet/config).
  for (const key of ["kubernetes.io/config.seen", "kubernetes.io/config.source", "kubernetes.io/config.mirror"]) {
    test(`a pod that sets ${key} itself (the kubelet sends its own value) is still a candidate: the victim's secrets do not speak for it`, async () => {
      secrets.set("victim/pull", GOOD);
      pods = [
        { namespace: "victim", name: "victim", spec: { ...container(`${REGISTRY}/app:latest`), imagePullSecrets: [{ name: "pull" }] } },
        { namespace: "attacker", name: "forged", annotations: { [key]: "x" }, spec: container(`${REGISTRY}/app:latest`) },
      ];
      assert.deepEqual(await candidates(view(), `${REGISTRY}/app:latest`), [
        { pod: "victim/victim", covered: true },
        { pod: "attacker/forged", covered: false },
      ]);
    });
  }
});

describe("through the proxy: an ImageStatus whose pod's annotations in the API differ from the call's", () => {
  const IMAGE = `${REGISTRY}/private/app:latest`;
  const IMAGE_ID = `sha256:${"c".repeat(64)}`;
  let stateDir: string;
  let proxy: NodeImageProxy | undefined;
  let fake: FakeImageService;

  beforeEach(async () => {
    stateDir = await mkdtemp(join(tmpdir(), "imprimatur-pod-view-"));
    fake = new FakeImageService();
    fake.publish(IMAGE, IMAGE_ID, GOOD);
    secrets.set("victim/pull", GOOD);
  });

  afterEach(async () => {
    await proxy?.stop();
    proxy = undefined;
    await rm(stateDir, { recursive: true, force: true });
  });

  /** The victim's own annotations, which the attacker copies. */
  const WORKLOAD = { app: "web" };
  /** The kubelet's annotations for a pod: its own as the kubelet saw them, then config.source and config.seen. */
  const sent = (own: Record<string, string>, seen: string) => ({ ...own, "kubernetes.io/config.source": "api", "kubernetes.io/config.seen": seen });

  async function victimPulledAndAttackerAsks(attacker: { api: Record<string, string>; call: Record<string, string> }): Promise<string | undefined> {
    const store = await RecordStore.open(join(stateDir, "state"));
    proxy = inProcessNodeProxy({ store, runtime: fake.runtime, podSecrets: view("warn", store.key) });
    await proxy.start();
    const victim = sent(WORKLOAD, "2026-11-25T10:00:00.1Z");
    const pulled = encodePullImageRequest({
      image: IMAGE,
      annotations: victim,
      auth: GOOD,
      sandbox: { namespace: "victim", name: "victim", uid: "uid-victim", annotations: victim },
    });
    assert.equal(decodePullImageResponse(await proxy.handle(fake.call("PullImage", pulled))).imageRef, IMAGE_ID);
    await proxy.stop(); // the record is written after the answer
    pods = [
      { namespace: "victim", name: "victim", annotations: WORKLOAD, spec: { ...container(IMAGE), imagePullSecrets: [{ name: "pull" }] } },
      { namespace: "attacker", name: "attacker", annotations: attacker.api, spec: container(IMAGE) },
    ];
    const asked = encodeImageStatusRequestFor(IMAGE, sent(attacker.call, "2026-11-25T10:00:01.2Z"));
    return decodeImageStatusResponse(await proxy.handle(fake.call("ImageStatus", asked)))?.id;
  }

  test("a pod with the same annotations is a candidate: absent, so the kubelet pulls with its (no) credentials", async () => {
    assert.equal(await victimPulledAndAttackerAsks({ api: WORKLOAD, call: WORKLOAD }), undefined);
  });

  test("kubernetes.io/config.seen set by the pod's author (the kubelet sends its own): absent", async () => {
    assert.equal(await victimPulledAndAttackerAsks({ api: { ...WORKLOAD, "kubernetes.io/config.seen": "x" }, call: WORKLOAD }), undefined);
  });

  test("an annotation changed since the kubelet's view: absent", async () => {
    assert.equal(await victimPulledAndAttackerAsks({ api: { app: "web-2" }, call: WORKLOAD }), undefined);
  });

  test("with the attacker's pod gone, the victim's own ImageStatus is answered from its secrets: present", async () => {
    assert.equal(await victimPulledAndAttackerAsks({ api: WORKLOAD, call: WORKLOAD }), undefined);
    pods = pods.filter((p) => p.namespace === "victim");
    const asked = encodeImageStatusRequestFor(IMAGE, sent(WORKLOAD, "2026-11-25T10:00:02.3Z"));
    assert.equal(decodeImageStatusResponse(await proxy!.handle(fake.call("ImageStatus", asked)))?.id, IMAGE_ID);
  });
});

describe("one list for calls that arrived before it started", () => {
  test("calls that took their ticket before a list started share it; a list the API refused is not reused", async () => {
    pods = [{ namespace: "a", name: "one", spec: container(`${REGISTRY}/app:v1`) }];
    const v = view();
    const arrival = v.arrival();
    const ask = () => v.credentialHashes(arrival, `${REGISTRY}/app:v1`, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000);
    const [a, b] = await Promise.all([ask(), ask()]);
    assert.deepEqual([a?.length, b?.length], [1, 1]);
    assert.equal(await ask().then((c) => c?.length), 1, "a later call with the same ticket is answered from the same list");
    assert.equal(podLists, 1);

    refusedLists = 1;
    const w = view();
    const early = w.arrival();
    assert.equal(await candidates(w, `${REGISTRY}/app:v1`), undefined);
    // A call whose ticket predates the refused list gets a new list, not the refusal.
    assert.equal((await w.credentialHashes(early, `${REGISTRY}/app:v1`, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000))?.length, 1);
  });

  test("a pod is a candidate when any of its images is the call's", async () => {
    pods = [
      {
        namespace: "a",
        name: "two",
        spec: {
          containers: [
            { name: "x", image: `${REGISTRY}/other:v1` },
            { name: "y", image: `${REGISTRY}/app:v1` },
          ],
        },
      },
    ];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/app:v1`), [{ pod: "a/two", covered: false }]);
  });
});

describe("a pod's pull policy for an image, by namespace, name and UID", () => {
  test("Always wins over the other containers of the image; every policy is read as given; the default depends on the tag", async () => {
    const containers = [
      { name: "c0", image: `${REGISTRY}/app:v1`, imagePullPolicy: "IfNotPresent" },
      { name: "c1", image: `${REGISTRY}/app:v1`, imagePullPolicy: "Always" },
      { name: "c2", image: `${REGISTRY}/latest:latest`, imagePullPolicy: "IfNotPresent" },
      { name: "c3", image: `${REGISTRY}/never:v1`, imagePullPolicy: "Never" },
      { name: "c4", image: `${REGISTRY}/untagged` },
      { name: "c5", image: `${REGISTRY}/tagged:v1` },
      ...Array.from({ length: 4 }, (_, i) => ({ name: `f${i}`, image: `${REGISTRY}/filler:v1` })),
      { name: "c10", image: `${REGISTRY}/tenth:latest`, imagePullPolicy: "IfNotPresent" },
    ];
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: { containers } }];
    const v = view();
    const policy = (image: string) => v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(image), Date.now() + 5_000);
    assert.equal(await policy(`${REGISTRY}/app:v1`), "Always");
    assert.equal(await policy(`${REGISTRY}/latest:latest`), "IfNotPresent");
    assert.equal(await policy(`${REGISTRY}/never:v1`), "Never");
    assert.equal(await policy(`${REGISTRY}/untagged:latest`), "Always");
    assert.equal(await policy(`${REGISTRY}/tagged:v1`), "IfNotPresent");
    assert.equal(await policy(`${REGISTRY}/tenth:latest`), "IfNotPresent", "the eleventh container's own policy");
  });

  test("no list in time: undefined", async () => {
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: container(`${REGISTRY}/app:v1`) }];
    listDelayMs = 500;
    const v = view();
    assert.equal(await v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 50), undefined);
  });

  test("the policy of the containers that name the image, Always when any does; volumes count; unknown pods give undefined", async () => {
    pods = [
      {
        namespace: "a",
        name: "p",
        uid: "u1",
        spec: {
          containers: [
            { name: "c1", image: `${REGISTRY}/app:v1`, imagePullPolicy: "IfNotPresent" },
            { name: "c2", image: `${REGISTRY}/other:v1`, imagePullPolicy: "Always" },
          ],
          initContainers: [{ name: "i", image: `${REGISTRY}/init`, imagePullPolicy: "Always" }],
          volumes: [
            { name: "v", image: { reference: `${REGISTRY}/data:1`, pullPolicy: "Always" } },
            { name: "w", image: { reference: `${REGISTRY}/data:2` } },
          ],
        },
      },
    ];
    const v = view();
    const policy = (image: string, uid = "u1") => v.pullPolicy({ namespace: "a", name: "p", uid }, ref(image), Date.now() + 5_000);
    assert.equal(await policy(`${REGISTRY}/app:v1`), "IfNotPresent");
    assert.equal(await policy(`${REGISTRY}/other:v1`), "Always");
    assert.equal(await policy(`${REGISTRY}/init:latest`), "Always", "the kubelet's :latest is the untagged init container");
    assert.equal(await policy(`${REGISTRY}/data:1`), "Always");
    assert.equal(await policy(`${REGISTRY}/data:2`), "IfNotPresent", "an image volume without pullPolicy: the default for a tag");
    assert.equal(await policy(`${REGISTRY}/app:v1`, "u2"), undefined, "another pod of that name (another UID)");
    assert.equal(await policy(`${REGISTRY}/absent:v1`), undefined);
  });
});

describe("a pod's pull secrets, hashed as the kubelet sends them", () => {
  /** The hash the proxy records for a kubelet pull with this CRI AuthConfig (unset fields are empty strings). */
  const sent = (a: Partial<Record<"username" | "password" | "identityToken" | "registryToken", string>>) =>
    credentialHash(KEY, { username: "", password: "", auth: "", serverAddress: "", identityToken: "", registryToken: "", ...a });
  const hashesFor = async (entry: Record<string, string>) => {
    secrets.set("a/pull", { entry });
    pods = [{ namespace: "a", name: "p", spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: "pull" }] } }];
    const v = view();
    return (await v.credentialHashes(v.arrival(), `${REGISTRY}/app:v1`, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000))?.[0]?.hashes;
  };
  const b64 = (s: string) => Buffer.from(s).toString("base64");

  test("an entry with an identity token beside its auth (as `docker login` writes one) matches the kubelet's pull: username and password only", async () => {
    // The kubelet's keyring keeps the username and password of an entry; its identitytoken never reaches the runtime.
    const user = "00000000-0000-0000-0000-000000000000";
    assert.deepEqual(await hashesFor({ auth: b64(`${user}:`), identitytoken: "refresh-token" }), [sent({ username: user })]);
    assert.deepEqual(await hashesFor({ username: "bob", password: "pw", registrytoken: "bearer" }), [sent({ username: "bob", password: "pw" })]);
  });

  test("a username without a password, or a password without a username, is sent (and hashed) with the other empty", async () => {
    assert.deepEqual(await hashesFor({ username: "bob" }), [sent({ username: "bob" })]);
    assert.deepEqual(await hashesFor({ password: "token-as-password" }), [sent({ password: "token-as-password" })]);
  });

  test("an entry with only an identity or registry token is no credential: the kubelet pulls anonymously with it", async () => {
    assert.deepEqual(await hashesFor({ identitytoken: "refresh-token" }), []);
    assert.deepEqual(await hashesFor({ registrytoken: "bearer" }), []);
  });

  test("only the pod's own imagePullSecrets count, as the kubelet reads them: its service account is not read", async () => {
    // A created pod already carries its service account's secrets; these are the service account's added later.
    secrets.set("a/account-pull", GOOD);
    serviceAccounts.set("a/default", ["account-pull"]);
    serviceAccounts.set("a/builder", ["account-pull"]);
    pods = [
      { namespace: "a", name: "plain", spec: container(`${REGISTRY}/app:v1`) },
      { namespace: "a", name: "built", spec: { ...container(`${REGISTRY}/app:v1`), serviceAccountName: "builder" } },
    ];
    assert.deepEqual(await candidates(view(), `${REGISTRY}/app:v1`), [
      { pod: "a/plain", covered: false },
      { pod: "a/built", covered: false },
    ]);
    assert.equal(serviceAccountReads, 0);
  });

  test("at debug level, each read of a pull secret from the API is logged by name", async () => {
    secrets.set("a/pull", GOOD);
    pods = [{ namespace: "a", name: "p", spec: { ...container(`${REGISTRY}/app:v1`), imagePullSecrets: [{ name: "pull" }] } }];
    const v = view("debug");
    assert.deepEqual(await v.credentialHashes(v.arrival(), `${REGISTRY}/app:v1`, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000), [
      { pod: "a/p", hashes: [hashOf(GOOD)] },
    ]);
    assert.deepEqual(debugLines, ["pull secrets: reading from the Kubernetes API: secret a/pull"]);
  });
});

describe("the pod of a pull, by namespace, name and UID together", () => {
  test("a pull reads its own pod, when asked: one GET each time, no list of the node's pods", async () => {
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: container(`${REGISTRY}/app:v1`, "IfNotPresent") }];
    const v = view();
    const policy = () => v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000);
    assert.equal(await policy(), "IfNotPresent");
    // The container's image changed since: the next pull sees the pod as it is now.
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: container(`${REGISTRY}/other:v1`, "IfNotPresent") }];
    assert.equal(await policy(), undefined);
    assert.deepEqual([podGets, podLists], [2, 0]);
  });

  test("a pod the API does not have, or will not show: undefined; a refusal is logged with the pod", async () => {
    const v = view();
    assert.equal(await v.pullPolicy({ namespace: "a", name: "gone", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000), undefined);
    assert.deepEqual(warnings, [], "a pod not found is no failure");
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: container(`${REGISTRY}/app:v1`, "Never") }];
    refusedGets = 1;
    assert.equal(await v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000), undefined);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /^cannot read the pod; deciding without it: /);
    assert.equal(await v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000), "Never");
  });

  test("a pod bound to another node is not this node's pull, whatever its UID", async () => {
    // The list the view read before held only the node's pods; the GET of one pod must keep to them too.
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: { ...container(`${REGISTRY}/app:v1`, "Never"), nodeName: "node2" } }];
    const v = view();
    assert.equal(await v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000), undefined);
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: container(`${REGISTRY}/app:v1`, "Never") }];
    assert.equal(await v.pullPolicy({ namespace: "a", name: "p", uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000), "Never");
  });

  test("a pod whose UID is the call's but whose namespace or name is not is not the call's pod", async () => {
    pods = [{ namespace: "a", name: "p", uid: "u1", spec: container(`${REGISTRY}/app:v1`, "Never") }];
    const v = view();
    const policy = (namespace: string, name: string) => v.pullPolicy({ namespace, name, uid: "u1" }, ref(`${REGISTRY}/app:v1`), Date.now() + 5_000);
    assert.equal(await policy("a", "p"), "Never");
    assert.equal(await policy("b", "p"), undefined, "another namespace");
    assert.equal(await policy("a", "q"), undefined, "another name");
  });
});
