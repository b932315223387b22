// The engine a node judges pulls with (src/node/node-engine.ts), through the pull gate as the node uses it: the
// policy set less what a pull cannot show, a tag resolved afresh for each pull, the node's own credentials for
// signature lookups, and namespace labels for policies with a namespaceSelector. The registry is in-process
// (test/unit/registry/fake-registry.ts); test/e2e/pull-gate.test.ts judges pulls against a real one.
import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { pino } from "pino";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import type { NamespaceLabelSource } from "../../../src/core/namespace-labels.ts";
import type { PullingPod } from "../../../src/core/pull-verification/pull-subject.ts";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import { buildNodeEngine, nodePolicySet, nodeServerConfig } from "../../../src/node/node-engine.ts";
import { PullGate, type PullVerdict } from "../../../src/node/pull-gate.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, imageManifest } from "../registry/fake-registry.ts";
import { freshKeyPolicy } from "../../support/image-policies.ts";

const NODE_CREDENTIALS: CredentialLookup = () => [{ source: "authfile", username: "node", password: "node-secret" }];
const NODE_AUTHORIZATION = `Basic ${Buffer.from("node:node-secret").toString("base64")}`;

function parsed(text: string) {
  const { policies, errors } = parsePolicyText(text, "node.yaml");
  assert.deepEqual(errors, []);
  return policies;
}

/** A gate over a node engine built from `policies`, with `registry` reachable over plain HTTP; closed at the test's end. */
async function nodeGate(
  t: TestContext,
  registry: FakeRegistry,
  policies: string,
  o: { staticCredentials?: CredentialLookup; namespaces?: NamespaceLabelSource } = {},
): Promise<PullGate> {
  const logger = pino({ level: "silent" });
  const engine = await buildNodeEngine({
    policies: parsed(policies),
    failOpen: false,
    logger,
    registries: registrySettingsMap([{ host: registry.host, insecure: true, allowLocalAddresses: true }]),
    ...o,
  });
  t.after(() => engine.close());
  return new PullGate({ engine, failOpen: false, logger, judgementMs: 5_000, ...(o.staticCredentials ? { staticCredentials: o.staticCredentials } : {}) });
}

async function fakeRegistry(t: TestContext, auth: "none" | "basic" = "none"): Promise<FakeRegistry> {
  const registry = await FakeRegistry.start({ auth, users: { node: { password: "node-secret" } } });
  t.after(() => registry.close());
  return registry;
}

const pod = (namespace: string): PullingPod => ({ namespace, name: "web", uid: "uid-web", labels: {} });

const judge = (g: PullGate, image: string, namespace = "apps"): Promise<PullVerdict> =>
  g.judge({ image, auth: undefined, pod: pod(namespace) }, Date.now() + 5_000);

const message = (v: PullVerdict) => (v.outcome === "refused" ? v.message : `not refused: ${JSON.stringify(v)}`);

const allowing = (host: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: local}
spec:
  rules: [{action: allow, images: ["${host}/*"]}]
  default: deny
`;

test("the node's config is the server's default, with its failure policy and no cache of tag resolutions", () => {
  for (const failOpen of [true, false])
    assert.deepEqual(nodeServerConfig(failOpen), { ...DEFAULT_SERVER_CONFIG, failOpen, digests: { ...DEFAULT_SERVER_CONFIG.digests, cacheTtlMs: 0 } });
});

test("a tag is resolved afresh for each pull: a moved tag is judged and pulled at its new digest at once", async (t) => {
  const registry = await fakeRegistry(t);
  const g = await nodeGate(t, registry, allowing(registry.host));
  const image = `${registry.host}/app:1.0`;
  const before = registry.putManifest("app", "1.0", imageManifest("one"));
  assert.equal((await judge(g, image)).digest, before);
  const after = registry.putManifest("app", "1.0", imageManifest("two"));
  assert.notEqual(after, before);
  const moved = await judge(g, image);
  assert.deepEqual(moved.outcome === "verified" && [moved.pullAs, moved.digest], [`${registry.host}/app@${after}`, after]);
});

test("PodRestrictions stay the webhook's: a pull shows no pod spec, so none refuses it; the other kinds are kept", async (t) => {
  const registry = await fakeRegistry(t);
  const digest = registry.putManifest("app", undefined, imageManifest("one"));
  const policies = `${allowing(registry.host)}---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: host-network-only}
spec:
  spec: {securityContext: {hostNetwork: {require: true}}}
`;
  const set = parsed(policies);
  assert.equal(set.PodRestriction.length, 1);
  assert.deepEqual(nodePolicySet(set), { ...set, PodRestriction: [] });
  const g = await nodeGate(t, registry, policies);
  assert.equal((await judge(g, `${registry.host}/app@${digest}`)).outcome, "verified");
});

test("signatures are looked up with the node's own credentials (--authfile) when the pull presents none", async (t) => {
  const registry = await fakeRegistry(t, "basic");
  const digest = registry.putManifest("signed/app", undefined, imageManifest("one"));
  const g = await nodeGate(t, registry, freshKeyPolicy("signed", `${registry.host}/*`), { staticCredentials: NODE_CREDENTIALS });
  const image = `${registry.host}/signed/app@${digest}`;
  // The registry let the node look, and there is no signature: that, not "unauthorized", is why the pull is refused.
  assert.match(
    message(await judge(g, image)),
    new RegExp(`^imprimatur node-proxy refused the pull: image "${image}" denied by policy signed rules\\[0\\]: no signatures found \\(`),
  );
  const lookups = registry.registryRequests.filter((r) => r.url.startsWith("/v2/signed/app/"));
  assert.ok(lookups.length > 0);
  assert.deepEqual(new Set(lookups.map((r) => r.authorization)), new Set([NODE_AUTHORIZATION]));
});

test("policies with a namespaceSelector decide by the labels the node reads (--kubeconfig)", async (t) => {
  const registry = await fakeRegistry(t);
  const digest = registry.putManifest("staging/app", undefined, imageManifest("one"));
  const g = await nodeGate(
    t,
    registry,
    `${allowing(registry.host)}---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-only}
spec:
  namespaceSelector: {matchLabels: {env: prod}}
  rules: [{action: deny, images: ["${registry.host}/staging/*"], message: not in prod}]
  default: allow
`,
    { namespaces: { labels: (namespace) => ({ shop: { env: "prod" }, sandbox: { env: "dev" } })[namespace] } },
  );
  const image = `${registry.host}/staging/app@${digest}`;
  assert.equal(
    message(await judge(g, image, "shop")),
    `imprimatur node-proxy refused the pull: image "${image}" denied by policy prod-only rules[0]: not in prod`,
  );
  assert.equal((await judge(g, image, "sandbox")).outcome, "verified");
});
