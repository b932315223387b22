// The /mutate, /validate and /imagereview endpoints of an in-process server resolving tags against a real
// docker-registry (TLS + htpasswd bcrypt): patches and records, record mode, the ImageReview path, the
// failure policy for an unreachable registry (with the fail-open audit record), and one registry lookup for
// many concurrent admissions of the same new tag.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { DEFAULT_SERVER_CONFIG, type ServerConfig } from "../../src/config/server-config.ts";
import { CredentialKeyring } from "../../src/credentials/keyring.ts";
import { loadAuthFile } from "../../src/credentials/docker-config.ts";
import { registrySettingsMap } from "../../src/registry/registry-settings.ts";
import type { RoundTrip } from "../../src/registry/registry-client.ts";
import { imageReview, podReview } from "../support/admission.ts";
import { getText, postJson } from "../support/https-client.ts";
import { startTestApp, type TestApp } from "../support/in-process-app.ts";
import { freePort } from "../support/ports.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { startTamperingProxy, type TamperingProxy } from "../support/tampering-proxy.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

let dir: string;
let registry: TestRegistry;
let deadHost: string;
let proxy: TamperingProxy;
const layouts = new TestLayouts();
const digests: Record<string, string> = {};
const apps: TestApp[] = [];

async function push(repository: string, tag: string, seed: string): Promise<string> {
  return (await layouts.push(registry, repository, tag, { seed })).digest;
}

async function app(config: Partial<ServerConfig> = {}, trips?: RoundTrip[]): Promise<TestApp> {
  const auth = await loadAuthFile(registry.authFile);
  const started = await startTestApp({
    policies: join(dir, "policies.yaml"),
    config: { ...DEFAULT_SERVER_CONFIG, ...config, digests: { ...DEFAULT_SERVER_CONFIG.digests, ...config.digests } },
    registries: registrySettingsMap([
      ...registry.settings(),
      { host: deadHost, ca: registry.caPem, allowLocalAddresses: true },
      { host: proxy.host, ca: proxy.caPem, allowLocalAddresses: true },
    ]),
    // The registry's user for the registry itself and for the proxy in front of it.
    staticCredentials: CredentialKeyring.of([...auth.entries, ...auth.entries.map((e) => ({ ...e, key: proxy.host }))]).lookup,
    ...(trips ? { onRegistryRoundTrip: (t: RoundTrip) => trips.push(t) } : {}),
  });
  apps.push(started);
  return started;
}

type Response = {
  allowed: boolean;
  patchType?: string;
  patch?: string;
  status?: { message: string };
  warnings?: string[];
  auditAnnotations?: Record<string, string>;
};

async function mutate(a: TestApp, body: unknown): Promise<Response> {
  const r = await postJson(`${a.base}/mutate`, a.ca, body);
  assert.equal(r.status, 200, r.text);
  return r.body.response;
}

function patchOf(r: Response): Array<{ op: string; path: string; value: unknown }> {
  assert.equal(r.patchType, "JSONPatch");
  return JSON.parse(Buffer.from(r.patch!, "base64").toString("utf8"));
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-pinning-server-"));
  registry = await startRegistry({ auth: "htpasswd" });
  deadHost = `127.0.0.1:${await freePort()}`; // nothing listens there
  proxy = await startTamperingProxy({ upstream: registry.url, upstreamCa: registry.caPem });
  digests.app = await push("team/app", "1.0", "app-1");
  digests.other = await push("team/other", "2.0", "other-2");
  await writeFile(
    join(dir, "policies.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "pin" },
      spec: { rules: [{ action: "allow", images: [`${registry.host}/*`, `${deadHost}/*`, `${proxy.host}/*`], digestMutate: true }], default: "allow" },
    }),
  );
});

after(() =>
  teardown([
    ...apps.map((a) => () => a.close()),
    () => proxy?.stop(),
    () => registry?.stop(),
    ...layouts.removals(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

test("/mutate pins a tag with the server's own credentials and records it; images that need no pin are left alone", async () => {
  const a = await app();
  const image = `${registry.host}/team/app:1.0`;
  const r = await mutate(a, podReview({ images: [image, "nginx:1.25", `${registry.host}/team/other@${digests.other}`] }));
  assert.equal(r.allowed, true);
  const patch = patchOf(r);
  assert.deepEqual(patch[0], { op: "replace", path: "/spec/containers/0/image", value: `${image}@${digests.app}` });
  assert.equal(patch.length, 2, "one image, one annotation");
  assert.equal(patch[1]!.path, "/metadata/annotations/imprimatur.dev~1pinned-images");
  assert.deepEqual(JSON.parse(r.auditAnnotations!["pinned-images"]!), { [image]: `${image}@${digests.app}` });
  assert.match(r.auditAnnotations!["pull-credentials"]!, /authfile /);
  const metrics = (await getText(`${a.base}/metrics`, a.ca)).text;
  assert.match(metrics, /imprimatur_digest_resolutions_total\{outcome="pinned"\} 1/);
  assert.match(metrics, /imprimatur_registry_requests_total\{method="GET",status="200"\} [1-9]/);
});

test("/mutate pins an image volume's reference as it pins a container image", async () => {
  const a = await app();
  const image = `${registry.host}/team/app:1.0`;
  const review = podReview({ images: [`${registry.host}/team/other@${digests.other}`] });
  (review.request.object.spec as Record<string, unknown>).volumes = [{ name: "data", image: { reference: image } }];
  const r = await mutate(a, review);
  assert.equal(r.allowed, true, r.status?.message);
  const patch = patchOf(r);
  assert.deepEqual(patch[0], { op: "replace", path: "/spec/volumes/0/image/reference", value: `${image}@${digests.app}` });
  assert.deepEqual(JSON.parse(r.auditAnnotations!["pinned-images"]!), { [image]: `${image}@${digests.app}` });
});

test("record mode resolves and records the digest without patching; /imagereview records too", async () => {
  const a = await app({ digests: { ...DEFAULT_SERVER_CONFIG.digests, mode: "record" } });
  const image = `${registry.host}/team/app:1.0`;
  const r = await mutate(a, podReview({ images: [image] }));
  assert.equal(r.allowed, true);
  assert.equal(r.patch, undefined);
  assert.deepEqual(JSON.parse(r.auditAnnotations!["resolved-images"]!), { [image]: `${image}@${digests.app}` });

  const ir = await postJson(`${a.base}/imagereview`, a.ca, imageReview([image]));
  assert.equal(ir.body.status.allowed, true);
  assert.deepEqual(JSON.parse(ir.body.status.auditAnnotations["resolved-images"]), { [image]: `${image}@${digests.app}` });
});

test("an unreachable registry denies when failing closed, and admits with a warning and an audit record when failing open", async () => {
  const image = `${deadHost}/team/app:1.0`;
  const closed = await app();
  const denied = await mutate(closed, podReview({ images: [image] }));
  assert.equal(denied.allowed, false);
  assert.match(
    denied.status!.message,
    new RegExp(
      `image "${image}" \\(spec\\.containers\\[0\\]\\.image\\) denied by policy pin rules\\[0\\]\\.digestMutate: the tag could not be resolved to a digest \\(.*${deadHost.replace(/\./g, "\\.")}`,
    ),
  );

  const open = await app({ failOpen: true });
  const admitted = await mutate(open, podReview({ images: [image] }));
  assert.equal(admitted.allowed, true);
  assert.equal(admitted.patch, undefined);
  assert.match(admitted.warnings![0]!, /admitted without a digest/);
  assert.equal(admitted.auditAnnotations!["fail-open"], "true");
  const audit = (await readFile(join(open.stateDir, "audit.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    audit.map((e) => [e.event, e.endpoint, e.images]),
    [["fail-open", "mutate", [image]]],
  );
});

test("a dry run is pinned the same way but leaves no audit record", async () => {
  const open = await app({ failOpen: true });
  const r = await mutate(open, podReview({ images: [`${deadHost}/team/app:1.0`], dryRun: true }));
  assert.equal(r.allowed, true);
  await assert.rejects(readFile(join(open.stateDir, "audit.jsonl"), "utf8"), /ENOENT/);
});

test("100 concurrent admissions of the same new tag cost one registry lookup", async () => {
  const trips: RoundTrip[] = [];
  const a = await app({}, trips);
  const image = `${registry.host}/team/other:2.0`;
  const answers = await Promise.all(Array.from({ length: 100 }, () => mutate(a, podReview({ images: [image] }))));
  assert.ok(answers.every((r) => r.allowed && patchOf(r)[0]!.value === `${image}@${digests.other}`));
  assert.equal(a.app.resolver.lookups, 1);
  const manifestGets = trips.filter((t) => t.method === "GET" && /\/manifests\//.test(t.url));
  assert.equal(manifestGets.filter((t) => t.status === 200).length, 1, trips.map((t) => `${t.method} ${t.url} ${t.status}`).join("\n"));
});

test("a Deployment's template and a workload update: only new or changed images are pinned", async () => {
  const a = await app();
  const image = `${registry.host}/team/app:1.0`;
  const deployment = (img: string, sidecar: string) => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "default" },
    spec: {
      template: {
        metadata: { labels: { app: "web" } },
        spec: {
          containers: [
            { name: "web", image: img },
            { name: "side", image: sidecar },
          ],
        },
      },
    },
  });
  const review = (object: unknown, oldObject?: unknown) => ({
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "u-1",
      kind: { group: "apps", version: "v1", kind: "Deployment" },
      resource: { group: "apps", version: "v1", resource: "deployments" },
      namespace: "default",
      operation: oldObject ? "UPDATE" : "CREATE",
      object,
      ...(oldObject ? { oldObject } : {}),
    },
  });
  const created = patchOf(await mutate(a, review(deployment(image, "busybox:1"))));
  assert.deepEqual(
    created.map((p) => p.path),
    ["/spec/template/spec/containers/0/image", "/spec/template/metadata/annotations"],
  );

  const side = `${registry.host}/team/other:2.0`;
  const updated = patchOf(await mutate(a, review(deployment(image, side), deployment(image, "busybox:1"))));
  assert.deepEqual(
    updated.map((p) => [p.path, p.value]).slice(0, 1),
    [["/spec/template/spec/containers/1/image", `${side}@${digests.other}`]],
    "the unchanged tag is not re-pinned",
  );
});

test("ephemeral containers (Kubernetes < 1.22 sends the EphemeralContainers object) are pinned in place, with nowhere to record", async () => {
  const a = await app();
  const image = `${registry.host}/team/app:1.0`;
  const r = await mutate(a, {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "u-eph",
      kind: { group: "", version: "v1", kind: "EphemeralContainers" },
      resource: { group: "", version: "v1", resource: "pods" },
      subResource: "ephemeralcontainers",
      namespace: "default",
      operation: "UPDATE",
      object: { apiVersion: "v1", kind: "EphemeralContainers", metadata: { name: "p" }, ephemeralContainers: [{ name: "debug", image }] },
      oldObject: { apiVersion: "v1", kind: "EphemeralContainers", metadata: { name: "p" }, ephemeralContainers: [] },
    },
  });
  assert.deepEqual(patchOf(r), [{ op: "replace", path: "/ephemeralContainers/0/image", value: `${image}@${digests.app}` }]);
});

test("a registry (or mirror) that alters the manifest it serves is a denial that says so", async () => {
  // A fake in the middle, because no real registry lies about its bytes (see test/support/tampering-proxy.ts).
  const a = await app();
  const image = `${proxy.host}/team/app:1.0`;
  proxy.mode = "pass";
  const honest = await mutate(a, podReview({ images: [image] }));
  assert.equal(patchOf(honest)[0]!.value, `${image}@${digests.app}`, "through an honest proxy the pin is the registry's digest");
  a.app.resolver.clear();
  proxy.mode = "alter-body";
  try {
    const r = await mutate(a, podReview({ images: [image] }));
    assert.equal(r.allowed, false);
    assert.equal(r.patch, undefined);
    assert.match(r.status!.message, /denied by policy pin rules\[0\]\.digestMutate: the tag could not be resolved to a digest \(.*does not match/);
  } finally {
    proxy.mode = "pass";
  }
});
