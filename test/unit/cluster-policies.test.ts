// Another cluster's own policy resources (src/core/policy-set/cluster-policies.ts): merged with the server's policies that
// cover the cluster, for that cluster's requests only, under names that cannot collide, and never able to put a
// trust root of its own in place of one of the server's. Pure merge first, then through the engine with callers
// of three clusters. The e2e test (test/e2e/cluster-reads.test.ts) reads them from a second real apiserver.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { subjectOfObject } from "../../src/core/admission-subject.ts";
import { clusterPolicyName, withClusterOwnPolicies } from "../../src/core/policy-set/cluster-policies.ts";
import type { PolicySet } from "../../src/core/policy-set/policy-kinds.ts";
import type { AdmissionCall } from "../../src/engine/admission-call.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { loadPolicies } from "../../src/policy/load-policies.ts";
import { embeddedTrustedRootJson } from "../../src/verification/trust-roots.ts";
import { validateSubject } from "../support/engine-review.ts";

const ROOT_JSON = JSON.stringify(embeddedTrustedRootJson());
const trustRoot = (name: string) => `apiVersion: imprimatur.dev/v1alpha1\nkind: TrustRoot\nmetadata: {name: ${name}}\nspec:\n  trustedRoot: ${ROOT_JSON}\n`;
const imagePolicy = (name: string, rules: string, extra = "") =>
  `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: ${name}}\nspec:\n${extra}  rules:\n${rules}\n  default: allow\n`;
const deny = (image: string, message: string) => `    - {action: deny, images: ["${image}"], message: "${message}"}`;
const keyless = (image: string, root: string) =>
  `    - {action: allow, images: ["${image}"], attestors: [{entries: [{keyless: {subject: "*", issuer: "*", trustRoot: ${root}}}]}]}`;

async function load(...documents: string[]): Promise<PolicySet> {
  const loaded = await loadPolicies({
    description: "test",
    read: async () => ({ texts: [{ origin: "inline.yaml", text: documents.join("---\n") }], errors: [] }),
  });
  return loaded.policies;
}

const SERVER = [
  imagePolicy("default", deny("*/server-denies*", "the server's")),
  imagePolicy("prod-only", deny("*/prod-denies*", "prod's"), "  clusters: [prod]\n"),
  `apiVersion: imprimatur.dev/v1alpha1\nkind: NamespacedImagePolicy\nmetadata: {name: tenant, namespace: apps}\nspec:\n  rules:\n${deny("*/home-tenant-denies*", "a tenant of the server's own cluster")}\n  default: allow\n`,
  imagePolicy("server-keyless", keyless("*/server-signed*", "corp")),
  trustRoot("corp"),
];

const OWN = [
  imagePolicy("default", deny("*/b-denies*", "cluster-b's")),
  imagePolicy("narrowed", deny("*/narrowed*", "narrowed to prod"), "  clusters: [prod]\n"),
  `apiVersion: imprimatur.dev/v1alpha1\nkind: NamespacedImagePolicy\nmetadata: {name: tenant, namespace: apps}\nspec:\n  rules:\n${deny("*/b-tenant-denies*", "a tenant of cluster-b")}\n  default: allow\n`,
  imagePolicy("own-root", keyless("*/own-root*", "b-root")),
  imagePolicy("shadowing", keyless("*/corp-signed*", "corp")),
  imagePolicy("public-good", keyless("*/public*", "sigstore-public-good")),
  trustRoot("corp"),
  trustRoot("b-root"),
  trustRoot("sigstore-public-good"),
];

test("a cluster's own policies join the server's that cover it, named CLUSTER:NAME; the server's namespaced policies and other clusters' stay out", async () => {
  const merged = withClusterOwnPolicies(await load(...SERVER), await load(...OWN), "cluster-b");
  assert.deepEqual(
    merged.ImagePolicy.map((p) => p.name),
    ["default", "server-keyless", "cluster-b:default", "cluster-b:apps/tenant", "cluster-b:own-root", "cluster-b:shadowing", "cluster-b:public-good"],
    "prod-only is not cluster-b's; the server's apps/tenant is its own cluster's; cluster-b's narrowed names prod only",
  );
  assert.equal(clusterPolicyName("cluster-b", "x"), "cluster-b:x");
  // A namespaced policy keeps its namespace: it still decides for that namespace only.
  assert.equal(merged.ImagePolicy.find((p) => p.name === "cluster-b:apps/tenant")?.namespace, "apps");
  // A policy narrowed to the cluster itself stays.
  const toItself = withClusterOwnPolicies(await load(...SERVER), await load(imagePolicy("mine", deny("*/x*", "x"), "  clusters: [cluster-b]\n")), "cluster-b");
  assert.ok(toItself.ImagePolicy.some((p) => p.name === "cluster-b:mine"));
});

test("a cluster's TrustRoot named as one of the server's (or the public-good root) is not used: its rules deny, saying why; the server's keep their root", async () => {
  const server = await load(...SERVER);
  const merged = withClusterOwnPolicies(server, await load(...OWN), "cluster-b");
  assert.deepEqual(
    merged.TrustRoot.map((r) => r.name),
    ["corp", "b-root"],
  );
  assert.equal(
    merged.TrustRoot.find((r) => r.name === "corp"),
    server.TrustRoot[0],
    "corp is the server's",
  );
  const unverifiable = (name: string) => merged.ImagePolicy.find((p) => p.name === name)?.rules[0]?.unverifiable;
  assert.equal(unverifiable("cluster-b:own-root"), undefined, "a root of its own name verifies");
  assert.equal(unverifiable("server-keyless"), undefined);
  assert.match(unverifiable("cluster-b:shadowing") ?? "", /cluster "cluster-b"'s TrustRoot "corp" has a name the server's own trust roots hold .*rename it/);
  assert.match(unverifiable("cluster-b:public-good") ?? "", /TrustRoot "sigstore-public-good" has a name the server's own/);
  // Without a TrustRoot of such a name, a rule naming the public-good root keeps it.
  const plain = withClusterOwnPolicies(server, await load(imagePolicy("public-good", keyless("*/public*", "sigstore-public-good"))), "cluster-b");
  assert.equal(plain.ImagePolicy.find((p) => p.name === "cluster-b:public-good")?.rules[0]?.unverifiable, undefined);
});

test("the engine judges a cluster's requests by its own policies and the server's, and no other cluster's by them", async () => {
  const engine = await buildEngine({
    config: structuredClone(DEFAULT_SERVER_CONFIG),
    policies: await load(...SERVER),
    offline: true,
    clusters: { home: "home", others: new Map() },
  });
  engine.setClusterPolicies("cluster-b", await load(...OWN));
  const denials = async (image: string, cluster: string) => {
    const plan = subjectOfObject({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "apps" },
      spec: { containers: [{ name: "c", image }] },
    });
    const call: AdmissionCall = {
      endpoint: "validate",
      deadline: Date.now() + 10_000,
      dryRun: true,
      caller: { authentication: "token", name: "apiserver", cluster },
    };
    assert.ok(plan.review);
    return (await validateSubject(engine, plan.subject, call)).violations.map((v) => v.policy);
  };
  assert.deepEqual(await denials("r.example/b-denies:1", "cluster-b"), ["cluster-b:default"]);
  assert.deepEqual(await denials("r.example/b-denies:1", "home"), [], "the server's own cluster");
  assert.deepEqual(await denials("r.example/b-denies:1", "cluster-c"), [], "another cluster");
  assert.deepEqual(await denials("r.example/b-tenant-denies:1", "cluster-b"), ["cluster-b:apps/tenant"]);
  assert.deepEqual(await denials("r.example/home-tenant-denies:1", "cluster-b"), [], "the server's own cluster's tenant");
  assert.deepEqual(await denials("r.example/home-tenant-denies:1", "home"), ["apps/tenant"]);
  assert.deepEqual(await denials("r.example/server-denies:1", "cluster-b"), ["default"], "the server's policy covers cluster-b too");
  // Replaced: the cluster's next set is in force at once, the server's untouched.
  engine.setClusterPolicies("cluster-b", await load(imagePolicy("default", deny("*/b-now-denies*", "cluster-b's, reloaded"))));
  assert.deepEqual(await denials("r.example/b-denies:1", "cluster-b"), []);
  assert.deepEqual(await denials("r.example/b-now-denies:1", "cluster-b"), ["cluster-b:default"]);
  assert.deepEqual(await denials("r.example/server-denies:1", "cluster-b"), ["default"]);
  await engine.close();
});

test("a cluster's PodRestrictions join too, renamed, and narrowed ones stay out; a shadowed root named only by an attestation, or with another, is said", async () => {
  const podRestriction = (name: string, extra = "") =>
    `apiVersion: imprimatur.dev/v1alpha1\nkind: PodRestriction\nmetadata: {name: ${name}}\nspec:\n${extra}  spec: {securityContext: {hostNetwork: {require: false}}}\n`;
  const attestationOnly = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: provenance}
spec:
  rules:
    - action: allow
      images: ["*/built*"]
      attestations:
        - predicateType: https://slsa.dev/provenance/v1
          attestors: [{entries: [{keyless: {subject: "*", issuer: "*", trustRoot: corp}}]}]
  default: allow
`;
  const twoRoots = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: two-roots}
spec:
  rules:
    - action: allow
      images: ["*/both*"]
      attestors: [{entries: [{keyless: {subject: "*", issuer: "*", trustRoot: corp}}, {keyless: {subject: "*", issuer: "*", trustRoot: sigstore-public-good}}]}]
  default: allow
`;
  const server = await load(...SERVER, podRestriction("server-pods"));
  const own = await load(
    podRestriction("no-host-network"),
    podRestriction("narrowed-pods", "  clusters: [prod]\n"),
    attestationOnly,
    twoRoots,
    trustRoot("corp"),
    trustRoot("sigstore-public-good"),
  );
  const merged = withClusterOwnPolicies(server, own, "cluster-b");
  assert.deepEqual(
    merged.PodRestriction.map((p) => p.name),
    ["server-pods", "cluster-b:no-host-network"],
  );
  const unverifiable = (name: string) => merged.ImagePolicy.find((p) => p.name === name)?.rules[0]?.unverifiable ?? "";
  assert.match(unverifiable("cluster-b:provenance"), /TrustRoot "corp" has a name the server's own trust roots hold/, "named by an attestation's attestors");
  assert.match(unverifiable("cluster-b:two-roots"), /TrustRoot "corp", "sigstore-public-good" has a name/, "both names, each once");
});
