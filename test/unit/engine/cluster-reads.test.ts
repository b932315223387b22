// Which cluster a review reads (src/engine/cluster-reads.ts), and what the engine does with it: a caller's
// namespace labels come from its own cluster's source, a cluster with no kubeconfig gets a review that needs a read
// refused whatever the failure policy, namespaced policies judge the server's own cluster's requests only, and the
// background scan judges the server's own cluster's pods by the policies spec.clusters gives it. The serve flags
// that name the clusters are read here too; test/e2e/cluster-reads.test.ts runs the same on two real apiservers.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { UNAUTHENTICATED, type Caller } from "../../../src/audit/caller.ts";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import type { NamespaceLabelSource } from "../../../src/core/namespace-labels.ts";
import type { AdmissionCall } from "../../../src/engine/admission-call.ts";
import { clusterToRead, fromHomeCluster, type ClusterConnections } from "../../../src/engine/cluster-reads.ts";
import { hasNamespacedPolicies, policiesForCluster } from "../../../src/core/policy-set/cluster-policies.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { auditPod } from "../../../src/scan/pod-audit.ts";
import { clusterKubeconfigs } from "../../../src/server/cluster-flags.ts";
import { mutateSubject, validateSubject } from "../../support/engine-review.ts";

const labels = (table: Record<string, Record<string, string>>): NamespaceLabelSource => ({ labels: (ns) => table[ns] });
const caller = (cluster: string): Caller => ({ authentication: "token", name: `apiserver-${cluster}`, cluster });

/** Cluster a is the server's own (its labels: `home`), cluster b has a kubeconfig, cluster c none. */
const CONNECTIONS: ClusterConnections = { home: "a", others: new Map([["b", { namespaces: labels({ apps: {}, team: {} }) }]]) };
const HOME_LABELS = labels({ apps: { exempt: "true" }, team: { exempt: "true" } });

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: no-nginx-unless-exempt }
spec:
  namespaceSelector: { matchExpressions: [{ key: exempt, operator: NotIn, values: ["true"] }] }
  rules: [{ action: deny, images: ["docker.io/library/nginx*"], message: "nginx runs in exempt namespaces only" }]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: { name: no-busybox, namespace: team }
spec:
  clusters: [a, b]
  rules: [{ action: deny, images: ["docker.io/library/busybox*"], message: "team runs no busybox" }]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: b-no-redis }
spec:
  clusters: [b]
  rules: [{ action: deny, images: ["docker.io/library/redis*"], message: "cluster b runs no redis" }]
  default: allow
`;

function pod(namespace: string, image: string) {
  return { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace, uid: "uid-p" }, spec: { containers: [{ name: "c", image }] } };
}

async function engine(opts: { failOpen?: boolean; home?: string } = {}): Promise<Engine> {
  const parsed = parsePolicyText(POLICIES, "inline.yaml");
  assert.deepEqual(parsed.errors, []);
  return buildEngine({
    config: { ...structuredClone(DEFAULT_SERVER_CONFIG), failOpen: opts.failOpen === true },
    policies: parsed.policies,
    namespaces: HOME_LABELS,
    clusters: { ...CONNECTIONS, ...(opts.home === undefined ? {} : { home: opts.home }) },
    offline: true,
  });
}

async function judge(e: Engine, namespace: string, image: string, who: Caller | undefined): Promise<{ allowed: boolean; messages: string[] }> {
  const plan = subjectOfObject(pod(namespace, image));
  assert.ok(plan.review);
  const call: AdmissionCall = { endpoint: "validate", deadline: Date.now() + 10_000, dryRun: true, ...(who ? { caller: who } : {}) };
  const decision = await validateSubject(e, plan.subject, call);
  return { allowed: decision.allowed, messages: decision.violations.map((v) => v.message) };
}

describe("the cluster a review reads", () => {
  test("the server's own: no caller, an unauthenticated one, or one of the cluster --cluster-name names", () => {
    assert.deepEqual(clusterToRead(undefined, CONNECTIONS), { kind: "home" });
    assert.deepEqual(clusterToRead(UNAUTHENTICATED, CONNECTIONS), { kind: "home" });
    assert.deepEqual(clusterToRead(caller("a"), CONNECTIONS), { kind: "home" });
    assert.equal(fromHomeCluster(caller("a"), CONNECTIONS), true);
    assert.equal(fromHomeCluster(caller("b"), CONNECTIONS), false);
  });

  test("another cluster's caller reads that cluster; one of a cluster with no kubeconfig reads none, with the reason", () => {
    const b = clusterToRead(caller("b"), CONNECTIONS);
    assert.equal(b.kind, "other");
    assert.equal(b.kind === "other" && b.connection, CONNECTIONS.others.get("b"));
    const c = clusterToRead(caller("c"), CONNECTIONS);
    assert.equal(c.kind, "unreadable");
    assert.match(c.kind === "unreadable" ? c.reason : "", /^cluster "c" has no kubeconfig on this server.*--cluster-kubeconfig c=FILE, or --cluster-name c/);
    // Without --cluster-name, every caller with a cluster is another cluster's: the server's own kubeconfig is never theirs.
    assert.equal(clusterToRead(caller("a"), { others: new Map() }).kind, "unreadable");
  });
});

describe("reviews read their caller's cluster", () => {
  test("namespace labels: each cluster's pods are judged by their own cluster's labels", async () => {
    const e = await engine();
    assert.equal((await judge(e, "apps", "docker.io/library/nginx:1", caller("a"))).allowed, true, "apps is exempt in a");
    assert.deepEqual(await judge(e, "apps", "docker.io/library/nginx:1", caller("b")), {
      allowed: false,
      messages: ["nginx runs in exempt namespaces only"],
    });
    await e.close();
  });

  test("a cluster with no kubeconfig: a review that needs labels is refused, failing open or not; one that needs none is judged", async () => {
    for (const failOpen of [false, true]) {
      const e = await engine({ failOpen });
      const refused = await judge(e, "apps", "docker.io/library/nginx:1", caller("c"));
      assert.equal(refused.allowed, false, `failOpen ${failOpen}`);
      assert.match(refused.messages.join("\n"), /cluster "c" has no kubeconfig on this server/);
      await e.close();
    }
    // Without a selector-bound policy nothing is read: the review is judged as usual.
    const plain = await buildEngine({
      config: structuredClone(DEFAULT_SERVER_CONFIG),
      policies: parsePolicyText(POLICIES.split("---")[2]!, "inline.yaml").policies,
      clusters: CONNECTIONS,
      offline: true,
    });
    assert.equal((await judge(plain, "apps", "docker.io/library/nginx:1", caller("c"))).allowed, true);
    await plain.close();
  });

  test("a namespaced policy judges the server's own cluster's requests only, whatever its spec.clusters names", async () => {
    const e = await engine();
    assert.deepEqual((await judge(e, "team", "docker.io/library/busybox:1", caller("a"))).messages, ["team runs no busybox"]);
    assert.equal((await judge(e, "team", "docker.io/library/busybox:1", caller("b"))).allowed, true, "b's namespace team is not a's");
    assert.equal((await judge(e, "team", "docker.io/library/busybox:1", undefined)).allowed, false, "check applies every policy");
    await e.close();
  });
});

describe("pull secrets of a cluster the server cannot read", () => {
  test("a pin of its pod is denied even when failing open, naming the cluster-unreadable code and the flag; the registry is never asked", async () => {
    const pinning = parsePolicyText(
      `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: pin }
spec:
  rules: [{ action: allow, images: ["registry.invalid/*"], digestMutate: true }]
  default: allow
`,
      "inline.yaml",
    ).policies;
    let asked = 0;
    const e = await buildEngine({
      config: { ...structuredClone(DEFAULT_SERVER_CONFIG), failOpen: true },
      policies: pinning,
      clusters: CONNECTIONS,
      onRegistryRoundTrip: () => asked++,
    });
    const plan = subjectOfObject({
      ...pod("apps", "registry.invalid/app:1"),
      spec: { containers: [{ name: "c", image: "registry.invalid/app:1" }], imagePullSecrets: [{ name: "regcred" }] },
    });
    assert.ok(plan.review);
    const decision = await mutateSubject(e, plan.subject, { endpoint: "mutate", deadline: Date.now() + 10_000, dryRun: true, caller: caller("c") });
    assert.equal(decision?.allowed, false);
    assert.match(
      decision?.violations[0]?.message ?? "",
      /\(cluster-unreadable: the pod's pull secrets could not be read: cluster "c" has no kubeconfig.*--cluster-kubeconfig c=FILE.*\); denied whatever the failure policy/,
    );
    assert.equal(asked, 0);
    await e.close();
  });
});

describe("namespaced policies belong to the server's own cluster", () => {
  const NAMESPACED_ONLY = `
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedPodRestriction
metadata: { name: no-privileged, namespace: team }
spec:
  spec:
    containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }]
`;
  const set = (text: string) => {
    const parsed = parsePolicyText(text, "inline.yaml");
    assert.deepEqual(parsed.errors, []);
    return parsed.policies;
  };
  const names = (s: ReturnType<typeof set>) => [...s.ImagePolicy, ...s.PodRestriction].map((p) => p.name).sort();

  test("policiesForCluster keeps them for the server's own cluster's requests only, of either kind", () => {
    const all = set(POLICIES + "---" + NAMESPACED_ONLY);
    assert.deepEqual(names(policiesForCluster(all, "b", true)), ["b-no-redis", "no-nginx-unless-exempt", "team/no-busybox", "team/no-privileged"]);
    assert.deepEqual(names(policiesForCluster(all, "b", false)), ["b-no-redis", "no-nginx-unless-exempt"]);
    assert.deepEqual(names(policiesForCluster(all, undefined)), ["no-nginx-unless-exempt", "team/no-privileged"], "home by default");
  });

  test("hasNamespacedPolicies: of either kind", () => {
    assert.equal(hasNamespacedPolicies(set(NAMESPACED_ONLY)), true);
    assert.equal(hasNamespacedPolicies(set(POLICIES.split("---")[2]!)), false);
    const clusterPodRestriction = NAMESPACED_ONLY.replace("NamespacedPodRestriction", "PodRestriction").replace(", namespace: team", "");
    assert.equal(hasNamespacedPolicies(set(clusterPodRestriction)), false);
    assert.equal(hasNamespacedPolicies(set(POLICIES)), true);
  });

  test("a set with no policy scoped to clusters still leaves another cluster's requests without them", async () => {
    const e = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: set(NAMESPACED_ONLY), clusters: CONNECTIONS, offline: true });
    const privileged = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "team" },
      spec: { containers: [{ name: "c", image: "docker.io/library/nginx:1", securityContext: { privileged: true } }] },
    };
    const plan = subjectOfObject(privileged);
    assert.ok(plan.review);
    const call = (who: Caller): AdmissionCall => ({ endpoint: "validate", deadline: Date.now() + 10_000, dryRun: true, caller: who });
    assert.equal((await validateSubject(e, plan.subject, call(caller("a")))).allowed, false);
    assert.equal((await validateSubject(e, plan.subject, call(caller("b")))).allowed, true);
    await e.close();
  });
});

describe("the background scan judges the server's own cluster's pods", () => {
  test("by the policies spec.clusters gives the cluster --cluster-name names; imprimatur audit by every policy", async () => {
    const redis = pod("apps", "docker.io/library/redis:7");
    const asA = await engine({ home: "a" });
    assert.deepEqual((await auditPod(asA, redis, undefined, { ownCluster: true })).results, [], "b's policy is not a's");
    assert.deepEqual(
      (await auditPod(asA, redis)).results.map((r) => r.policy),
      ["b-no-redis"],
    );
    await asA.close();
    const asB = await engine({ home: "b" });
    assert.deepEqual(
      (await auditPod(asB, redis, undefined, { ownCluster: true })).results.map((r) => r.policy),
      ["b-no-redis"],
    );
    await asB.close();
    // Unnamed: only the policies scoped to no cluster.
    const unnamed = await buildEngine({
      config: structuredClone(DEFAULT_SERVER_CONFIG),
      policies: parsePolicyText(POLICIES, "inline.yaml").policies,
      namespaces: HOME_LABELS,
      offline: true,
    });
    assert.deepEqual((await auditPod(unnamed, redis, undefined, { ownCluster: true })).results, []);
    await unnamed.close();
  });
});

describe("serve --cluster-name and --cluster-kubeconfig", () => {
  test("NAME=FILE pairs, each cluster once, never the server's own", () => {
    assert.deepEqual(clusterKubeconfigs({ "cluster-name": "a", "cluster-kubeconfig": ["b=/etc/b.yaml", "c=x=y"] }), {
      home: "a",
      files: new Map([
        ["b", "/etc/b.yaml"],
        ["c", "x=y"],
      ]),
    });
    assert.deepEqual(clusterKubeconfigs({}), { home: undefined, files: new Map() });
    const problem = (flags: Parameters<typeof clusterKubeconfigs>[0]) => {
      const r = clusterKubeconfigs(flags);
      return "problem" in r ? r.problem : "";
    };
    assert.match(problem({ "cluster-kubeconfig": ["b"] }), /--cluster-kubeconfig: "b" is not NAME=FILE/);
    assert.match(problem({ "cluster-kubeconfig": ["b="] }), /is not NAME=FILE/);
    assert.match(problem({ "cluster-kubeconfig": ["b c=f"] }), /is not NAME=FILE/);
    assert.match(problem({ "cluster-kubeconfig": ["b=f", "b=g"] }), /--cluster-kubeconfig b: given twice/);
    assert.match(problem({ "cluster-name": "a", "cluster-kubeconfig": ["a=f"] }), /that is the server's own cluster/);
    assert.match(problem({ "cluster-name": "a b" }), /--cluster-name: "a b" is not a cluster name/);
  });
});
