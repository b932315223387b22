// NamespacedImagePolicy and NamespacedPodRestriction (namespaced-policy.ts): they load through the one loader into
// their cluster kind's list, named "namespace/name"; they apply in their namespace only; whatever would reach
// beyond it is refused at load; and they only add restrictions: a cluster policy's denial stands whatever they
// say (default allow, break-glass), and a cluster Accept PodRestriction does not exempt a pod from them.
import { describe, it } from "node:test";
import { tempFolder } from "../support/temp-folders.ts";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPolicies, parsePolicyText } from "../../src/policy/load-policies.ts";
import { namespacedObjectName, namespacedPolicyName } from "../../src/core/namespaced-policy.ts";
import { PolicyLoadError, renderPolicyError } from "../../src/policy/policy-error.ts";
import { evaluateImagePolicies } from "../../src/core/image-policy/image-policy.ts";
import { renderReason } from "../../src/core/decision.ts";
import { decidePodRestrictions } from "../../src/core/pod-restriction/pod-restriction-decision.ts";
import { PodRestrictionIndex } from "../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../src/core/workload-templates.ts";
import type { PodUnderReview } from "../../src/core/pod-under-review.ts";
import { policyDocumentOf, resourceOrigin, type PolicyResourceObject } from "../../src/policy-resources/resource-documents.ts";
import type { ResourceOutcome } from "../../src/policy-resources/status-conditions.ts";
import { ResourcePolicySource, type PolicyResourceStore } from "../../src/policy-resources/resource-policy-source.ts";
import { NO_DOCKER_HUB as CLUSTER_DENIES_HUB } from "../support/tenant-policies.ts";

const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));

/** Parses documents that must load; returns the set. */
function load(text: string) {
  const parsed = parsePolicyText(text, "p.yaml");
  assert.deepEqual(parsed.errors.map(renderPolicyError), []);
  return parsed.policies;
}

function errorsOf(text: string): string[] {
  return parsePolicyText(text, "p.yaml").errors.map(renderPolicyError);
}

const SHOP_CORP_ONLY = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: corp-only, namespace: shop}
spec:
  rules:
    - {action: allow, images: ["registry.example.com/*"]}
  defaultMessage: "shop runs images of registry.example.com only"
`;

const images = (namespace: string, ...list: string[]) => ({ namespace, annotations: {}, images: list.map((image) => ({ image })) });

describe("NamespacedImagePolicy: loading", () => {
  it("compiles into the ImagePolicy list, named namespace/name and bound to its namespace", () => {
    const set = load(SHOP_CORP_ONLY);
    assert.equal(set.ImagePolicy.length, 1);
    const [p] = set.ImagePolicy;
    assert.equal(p!.name, "shop/corp-only");
    assert.equal(p!.namespace, "shop");
    assert.deepEqual(p!.namespaces, ["shop"]);
  });

  it("the object's own name comes back from a policy name of its namespace; any other name is kept as it is", () => {
    assert.equal(namespacedObjectName("shop", namespacedPolicyName("shop", "corp-only")), "corp-only");
    for (const other of ["corp-only", "shopping/corp-only", "other/corp-only", "shop"]) assert.equal(namespacedObjectName("shop", other), other);
  });

  it("needs metadata.namespace, a namespace name", () => {
    assert.deepEqual(errorsOf(SHOP_CORP_ONLY.replace("namespace: shop", "labels: {}")), [
      'p.yaml:3 (document 1, metadata.namespace): missing required field "namespace": a NamespacedImagePolicy applies in the namespace it is in',
    ]);
    assert.match(errorsOf(SHOP_CORP_ONLY.replace("namespace: shop", "namespace: Shop_1"))[0]!, /metadata\.namespace\): must be a namespace name/);
    const namespaceErrors = (namespace: string) => errorsOf(SHOP_CORP_ONLY.replace("namespace: shop", `namespace: ${namespace}`));
    // 5 and true are YAML's number and boolean, not names.
    for (const bad of ["shop_1", "shop.", "-shop", "5", "true", "a".repeat(64)])
      assert.match(namespaceErrors(bad)[0] ?? "", /metadata\.namespace\): must be a namespace name/, bad);
    for (const good of ["s", '"7"', "shop-2", "a".repeat(63)]) assert.deepEqual(namespaceErrors(good), [], good);
    assert.deepEqual(
      errorsOf(SHOP_CORP_ONLY.replace("metadata: {name: corp-only, namespace: shop}", "metadata: null")),
      ['p.yaml:3 (document 1, metadata.namespace): missing required field "namespace": a NamespacedImagePolicy applies in the namespace it is in'],
      "metadata that is not a map has no namespace",
    );
  });

  for (const [field, value, why] of [
    ["namespaces", "[shop, other]", /cannot set namespaces: it applies only in its own namespace \(an ImagePolicy can\)/],
    ["namespaceSelector", "{matchLabels: {env: prod}}", /cannot set namespaceSelector: it applies only in its own namespace/],
    [
      "imagePaths",
      "[{apiVersion: example.com/v1, kind: Thing, paths: [spec.image]}]",
      /cannot set imagePaths: image locations in custom resources extend the image extraction for every namespace/,
    ],
  ] as const) {
    it(`refuses spec.${field}, saying why`, () => {
      const errors = errorsOf(SHOP_CORP_ONLY.replace("spec:\n", `spec:\n  ${field}: ${value}\n`));
      assert.equal(errors.length, 1, errors.join("\n"));
      assert.match(errors[0]!, new RegExp(`spec\\.${field}\\): `));
      assert.match(errors[0]!, why);
    });
  }

  it("without a spec map is a load error saying so", () => {
    const head = "apiVersion: imprimatur.dev/v1alpha1\nkind: NamespacedImagePolicy\nmetadata: {name: a, namespace: shop}\n";
    assert.match(errorsOf(head).join("\n"), /missing required field "spec"/);
    assert.match(errorsOf(`${head}spec: null\n`).join("\n"), /spec\): must be a mapping, got null/);
  });

  it("refuses keys in another namespace's Secret, takes its own namespace's", () => {
    const withKey = (ref: string) =>
      SHOP_CORP_ONLY.replace(
        '- {action: allow, images: ["registry.example.com/*"]}',
        `- {action: allow, images: ["registry.example.com/*"], attestors: [{entries: [{staticKey: {keyRef: "${ref}"}}]}]}`,
      );
    const errors = errorsOf(withKey("k8s://kube-system/signing/cosign.pub"));
    assert.equal(errors.length, 1, errors.join("\n"));
    assert.match(
      errors[0]!,
      /spec\.rules\[0\]\.attestors\[0\]\.entries\[0\]\.staticKey\.keyRef\): names a Secret in namespace "kube-system"; a NamespacedImagePolicy may only use Secrets of its own namespace \(k8s:\/\/shop\/…\)/,
    );
    assert.deepEqual(errorsOf(withKey("k8s://shop/signing")), []);
  });

  it("refuses Notation certificates in another namespace's Secret (each store), takes its own namespace's", () => {
    const withStore = (field: string, ref: string) =>
      SHOP_CORP_ONLY.replace(
        '- {action: allow, images: ["registry.example.com/*"]}',
        `- {action: allow, images: ["registry.example.com/*"], attestors: [{entries: [{notary: {${field === "certsRef" ? "" : 'certsRef: "k8s://shop/roots", '}${field}: "${ref}"}}]}]}`,
      );
    for (const field of ["certsRef", "signingAuthorityCertsRef", "tsaCertsRef"]) {
      const errors = errorsOf(withStore(field, "k8s://kube-system/roots"));
      assert.equal(errors.length, 1, errors.join("\n"));
      assert.match(
        errors[0]!,
        new RegExp(
          `spec\\.rules\\[0\\]\\.attestors\\[0\\]\\.entries\\[0\\]\\.notary\\.${field}\\): names a Secret in namespace "kube-system"; a NamespacedImagePolicy may only use Secrets of its own namespace`,
        ),
      );
      assert.deepEqual(errorsOf(withStore(field, "k8s://shop/roots")), []);
    }
  });

  it("takes validationActions unchanged: Warn admits, with the failure as an advisory under its kind", () => {
    const { ImagePolicy } = load(SHOP_CORP_ONLY.replace("spec:\n", "spec:\n  validationActions: [Warn]\n"));
    assert.deepEqual(ImagePolicy[0]!.validationActions, ["Warn"]);
    const d = evaluateImagePolicies(ImagePolicy, images("shop", "quay.io/app:1"), {});
    assert.equal(d.allowed, true);
    assert.deepEqual(
      d.advisories?.map((v) => [v.kind, v.policy, v.actions]),
      [["NamespacedImagePolicy", "shop/corp-only", ["Warn"]]],
    );
  });

  it("names are unique per namespace: the same name in another namespace or as a cluster policy is another policy", () => {
    const other = SHOP_CORP_ONLY.replace("namespace: shop", "namespace: other");
    const cluster = SHOP_CORP_ONLY.replace("kind: NamespacedImagePolicy", "kind: ImagePolicy").replace(", namespace: shop", "");
    const set = load([SHOP_CORP_ONLY, other, cluster].join("---\n"));
    assert.deepEqual(
      set.ImagePolicy.map((p) => p.name),
      ["shop/corp-only", "other/corp-only", "corp-only"],
    );
  });

  it("the same name twice in one namespace is an error naming the kind", async () => {
    const dir = await tempFolder("imprimatur-namespaced-");
    await writeFile(join(dir, "a.yaml"), SHOP_CORP_ONLY);
    await writeFile(join(dir, "b.yaml"), SHOP_CORP_ONLY);
    await assert.rejects(loadPolicies(dir), (e: unknown) => {
      assert.ok(e instanceof PolicyLoadError);
      assert.match(e.message, /NamespacedImagePolicy "shop\/corp-only" is already defined in/);
      return true;
    });
    const pods = await tempFolder("imprimatur-namespaced-");
    await writeFile(join(pods, "a.yaml"), SHOP_NO_PRIVILEGED);
    await writeFile(join(pods, "b.yaml"), SHOP_NO_PRIVILEGED);
    await assert.rejects(loadPolicies(pods), /\): NamespacedPodRestriction "shop\/no-privileged" is already defined in/);
  });

  it("a cluster kind with metadata.namespace is refused, pointing at the namespaced kind", () => {
    assert.deepEqual(errorsOf(SHOP_CORP_ONLY.replace("kind: NamespacedImagePolicy", "kind: ImagePolicy")), [
      "p.yaml:3 (document 1, metadata.namespace): an ImagePolicy is cluster-wide and has no namespace; for a policy of one namespace write kind NamespacedImagePolicy",
    ]);
    assert.deepEqual(errorsOf(SHOP_NO_PRIVILEGED.replace("kind: NamespacedPodRestriction", "kind: PodRestriction")), [
      "p.yaml:3 (document 1, metadata.namespace): a PodRestriction is cluster-wide and has no namespace; for a policy of one namespace write kind NamespacedPodRestriction",
    ]);
  });

  it("has only imprimatur.dev/v1alpha1, and unknown kinds list the namespaced kinds", () => {
    assert.deepEqual(errorsOf(SHOP_CORP_ONLY.replace("imprimatur.dev/v1alpha1", "policy/v1alpha1")), [
      'p.yaml:1 (document 1, apiVersion): must be "imprimatur.dev/v1alpha1", got "policy/v1alpha1"',
    ]);
    assert.match(
      errorsOf(SHOP_CORP_ONLY.replace("NamespacedImagePolicy", "ScopedPolicy"))[0]!,
      /known kinds: .*NamespacedImagePolicy, NamespacedPodRestriction/,
    );
  });
});

describe("NamespacedImagePolicy: evaluation", () => {
  it("applies in its namespace only", () => {
    const { ImagePolicy } = load(SHOP_CORP_ONLY);
    const inShop = evaluateImagePolicies(ImagePolicy, images("shop", "quay.io/app:1"), {});
    assert.equal(inShop.allowed, false);
    assert.equal(
      renderReason(inShop.violations),
      'image "quay.io/app:1" denied by NamespacedImagePolicy shop/corp-only default: shop runs images of registry.example.com only',
    );
    assert.equal(evaluateImagePolicies(ImagePolicy, images("other", "quay.io/app:1"), {}).allowed, true);
    assert.equal(evaluateImagePolicies(ImagePolicy, images("shop", "registry.example.com/app:1"), {}).allowed, true);
  });

  it("cannot lift a cluster policy's denial: default allow and an allow rule leave it standing", () => {
    const lenient = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: anything-goes, namespace: shop}
spec:
  rules:
    - {action: allow, images: ["docker.io/*"]}
  default: allow
`;
    const { ImagePolicy } = load([CLUSTER_DENIES_HUB, lenient].join("---\n"));
    const d = evaluateImagePolicies(ImagePolicy, images("shop", "docker.io/library/nginx:1"), {});
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.policy, v.kind]),
      [["no-docker-hub", undefined]],
    );
    assert.deepEqual(
      d.passes?.map((p) => [p.kind, p.policy]),
      [["NamespacedImagePolicy", "shop/anything-goes"]],
    );
  });

  it("adds its denials to the cluster's: both are listed", () => {
    const { ImagePolicy } = load([CLUSTER_DENIES_HUB, SHOP_CORP_ONLY].join("---\n"));
    const d = evaluateImagePolicies(ImagePolicy, images("shop", "docker.io/library/nginx:1"), {});
    assert.deepEqual(
      d.violations.map((v) => v.policy),
      ["no-docker-hub", "shop/corp-only"],
    );
  });

  const breakGlass = {
    "break-glass.image-policy.k8s.io/reason": "incident",
    "break-glass.image-policy.k8s.io/ticket": "OPS-1",
  };

  it("its break-glass cannot set aside a cluster policy's denial that allows none", () => {
    const lenient = SHOP_CORP_ONLY.replace("spec:\n", "spec:\n  breakGlass: {allowed: true}\n");
    const { ImagePolicy } = load([CLUSTER_DENIES_HUB, lenient].join("---\n"));
    const d = evaluateImagePolicies(ImagePolicy, { ...images("shop", "docker.io/library/nginx:1"), annotations: breakGlass }, {});
    assert.equal(d.allowed, false);
    assert.equal(d.auditAnnotations["break-glass"], "refused");
    assert.ok(
      d.violations.some((v) => v.policy === "no-docker-hub" && v.rule === "breakGlass"),
      JSON.stringify(d.violations),
    );
  });

  it("a namespaced policy that allows no break-glass refuses it under its kind and name", () => {
    const { ImagePolicy } = load(SHOP_CORP_ONLY);
    const d = evaluateImagePolicies(ImagePolicy, { ...images("shop", "quay.io/app:1"), annotations: breakGlass }, {});
    assert.equal(d.allowed, false);
    assert.match(
      renderReason(d.violations),
      /denied by NamespacedImagePolicy shop\/corp-only breakGlass: break-glass was requested but this policy does not allow overrides in namespace "shop"/,
    );
  });

  it("its own break-glass sets aside its own denial where the cluster's policies allow the image", () => {
    const lenient = SHOP_CORP_ONLY.replace("spec:\n", "spec:\n  breakGlass: {allowed: true}\n");
    const { ImagePolicy } = load([CLUSTER_DENIES_HUB, lenient].join("---\n"));
    const d = evaluateImagePolicies(ImagePolicy, { ...images("shop", "quay.io/app:1"), annotations: breakGlass }, {});
    assert.equal(d.allowed, true);
    assert.equal(d.auditAnnotations["break-glass"], "used");
  });
});

const SHOP_NO_PRIVILEGED = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedPodRestriction
metadata: {name: no-privileged, namespace: shop}
spec:
  spec:
    containers:
      - securityContext: {privileged: {allowNil: true, require: false}}
`;

const CLUSTER_ACCEPT_CORP = `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: trust-corp-images}
binding: {mode: Accept}
spec:
  spec:
    containers:
      - image: {registry: {allowed: [registry.example.com]}}
`;

const CLUSTER_DROP_HOST_NETWORK = `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: no-host-network}
spec:
  spec:
    securityContext: {hostNetwork: {require: false}}
`;

function pod(spec: Record<string, unknown>): PodUnderReview {
  const [p] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec });
  assert.ok(p);
  return p;
}

const privilegedCorp = pod({ containers: [{ name: "app", image: "registry.example.com/app:1", securityContext: { privileged: true } }] });
const hostNetworkCorp = pod({ hostNetwork: true, containers: [{ name: "app", image: "registry.example.com/app:1" }] });

describe("NamespacedPodRestriction", () => {
  it("compiles into the PodRestriction list as a Drop policy bound to its namespace", () => {
    const [p] = load(SHOP_NO_PRIVILEGED).PodRestriction;
    assert.equal(p!.name, "shop/no-privileged");
    assert.equal(p!.mode, "Drop");
    assert.deepEqual(p!.namespaces, ["shop"]);
  });

  it("has only imprimatur.dev/v1alpha1, not the other apiVersion PodRestriction takes", () => {
    assert.deepEqual(errorsOf(SHOP_NO_PRIVILEGED.replace("imprimatur.dev/v1alpha1", "policy/v1alpha1")), [
      'p.yaml:1 (document 1, apiVersion): must be "imprimatur.dev/v1alpha1", got "policy/v1alpha1"',
    ]);
  });

  it("refuses binding (and with it Accept), saying why", () => {
    const errors = errorsOf(SHOP_NO_PRIVILEGED.replace("spec:\n  spec:", "binding: {mode: Accept}\nspec:\n  spec:"));
    assert.equal(errors.length, 1, errors.join("\n"));
    assert.match(
      errors[0]!,
      /\(document 1, binding\): a NamespacedPodRestriction cannot set binding: it applies only in its own namespace, and only as a Drop policy .*\(a PodRestriction can\)$/,
    );
  });

  it("applies in its namespace only", () => {
    const index = new PodRestrictionIndex(load(SHOP_NO_PRIVILEGED).PodRestriction);
    const d = decidePodRestrictions(index, privilegedCorp, "shop", {});
    assert.equal(d.allowed, false);
    assert.match(renderReason(d.violations), /denied by NamespacedPodRestriction shop\/no-privileged /);
    assert.equal(decidePodRestrictions(index, privilegedCorp, "other", {}).allowed, true);
  });

  it("a cluster Accept policy that accepts the pod does not exempt it from the namespace's policy", () => {
    const index = new PodRestrictionIndex(load([CLUSTER_ACCEPT_CORP, CLUSTER_DROP_HOST_NETWORK, SHOP_NO_PRIVILEGED].join("---\n")).PodRestriction);
    // In another namespace the Accept policy admits the corp image over the cluster's Drop policy, as before.
    assert.equal(decidePodRestrictions(index, hostNetworkCorp, "other", {}).allowed, true);
    assert.equal(decidePodRestrictions(index, hostNetworkCorp, "shop", {}).allowed, true);
    const d = decidePodRestrictions(index, privilegedCorp, "shop", {});
    assert.equal(d.allowed, false);
    assert.deepEqual([...new Set(d.violations.map((v) => v.policy))], ["shop/no-privileged"]);
  });

  it("cannot accept a pod a cluster Drop policy denies", () => {
    const lenient = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedPodRestriction
metadata: {name: anything, namespace: shop}
spec: {}
`;
    const index = new PodRestrictionIndex(load([CLUSTER_DROP_HOST_NETWORK, lenient].join("---\n")).PodRestriction);
    const d = decidePodRestrictions(index, hostNetworkCorp, "shop", {});
    assert.equal(d.allowed, false);
    assert.deepEqual([...new Set(d.violations.map((v) => `${v.kind} ${v.policy}`))], ["PodRestriction no-host-network"]);
  });
});

describe("check loads namespaced policies from files", () => {
  it("denies in the policy's namespace only, naming the namespaced policy", async () => {
    const dir = await tempFolder("imprimatur-namespaced-check-");
    await writeFile(join(dir, "policies.yaml"), [CLUSTER_DENIES_HUB, SHOP_CORP_ONLY].join("---\n"));
    const podIn = (namespace: string) => `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: ${namespace}}
spec:
  containers: [{name: web, image: "quay.io/web@sha256:${"a".repeat(64)}"}]
`;
    await writeFile(join(dir, "shop.yaml"), podIn("shop"));
    await writeFile(join(dir, "other.yaml"), podIn("other"));
    const check = (file: string) =>
      spawnSync(process.execPath, [BIN, "check", "--policies", join(dir, "policies.yaml"), "-f", join(dir, file)], { encoding: "utf8" });
    const denied = check("shop.yaml");
    assert.equal(denied.status, 1, denied.stderr);
    assert.match(denied.stdout, /NamespacedImagePolicy shop\/corp-only default: shop runs images of registry\.example\.com only/);
    const allowed = check("other.yaml");
    assert.equal(allowed.status, 0, allowed.stdout + allowed.stderr);
  });
});

describe("namespaced policies as custom resources", () => {
  /** A namespaced object as the API returns it. */
  function namespacedResource(kind: string, namespace: string, name: string, spec: unknown): PolicyResourceObject {
    const uid = `uid-${namespace}-${name}`;
    return {
      kind,
      name,
      namespace,
      uid,
      generation: 1,
      object: { apiVersion: "imprimatur.dev/v1alpha1", kind, metadata: { name, namespace, uid, generation: 1, resourceVersion: "3" }, spec },
    };
  }
  const store = (objects: PolicyResourceObject[]): PolicyResourceStore => ({
    synced: async () => {},
    snapshot: () => [...objects],
    subscribe: () => ({ close: () => {} }),
  });

  it("the document keeps metadata.namespace, and the object's origin names its namespace", () => {
    const r = namespacedResource("NamespacedImagePolicy", "shop", "corp-only", { rules: [] });
    assert.deepEqual(policyDocumentOf(r.object).metadata, { name: "corp-only", namespace: "shop" });
    assert.equal(resourceOrigin(r), "NamespacedImagePolicy/shop/corp-only");
  });

  it("the same name in two namespaces loads as two policies; one that reaches beyond its namespace is rejected alone, saying why", async () => {
    const rules = { rules: [{ action: "allow", images: ["registry.example.com/*"] }] };
    const outcomes = new Map<string, ResourceOutcome>();
    const source = new ResourcePolicySource({
      store: store([
        namespacedResource("NamespacedImagePolicy", "shop", "corp-only", rules),
        namespacedResource("NamespacedImagePolicy", "team-a", "corp-only", rules),
        namespacedResource("NamespacedImagePolicy", "team-b", "wide", { ...rules, namespaces: ["shop"] }),
        namespacedResource("NamespacedPodRestriction", "shop", "accept-all", {}),
      ]),
      status: { report: (r, outcome) => void outcomes.set(resourceOrigin(r), outcome) },
    });
    const loaded = await loadPolicies(source);
    source.loaded({ errors: [] });
    assert.deepEqual(
      loaded.policies.ImagePolicy.map((p) => p.name),
      ["shop/corp-only", "team-a/corp-only"],
    );
    assert.deepEqual(
      loaded.policies.PodRestriction.map((p) => p.name),
      ["shop/accept-all"],
    );
    const wide = outcomes.get("NamespacedImagePolicy/team-b/wide");
    assert.equal(wide?.state, "rejected");
    assert.equal(wide.reason, "InvalidPolicy");
    assert.deepEqual(
      wide.errors.map((e) => `${e.origin} ${e.path}: ${e.message}`),
      [
        "NamespacedImagePolicy/team-b/wide spec.namespaces: a NamespacedImagePolicy cannot set namespaces: it applies only in its own namespace (an ImagePolicy can)",
      ],
    );
    assert.equal(outcomes.get("NamespacedImagePolicy/shop/corp-only")?.state, "in-force");
  });
});

describe("imprimatur test with namespaced policies", () => {
  it("a PolicyTest names a namespaced policy as namespace/name", async () => {
    const dir = await tempFolder("imprimatur-namespaced-test-");
    await writeFile(join(dir, "policies.yaml"), [CLUSTER_DENIES_HUB, SHOP_CORP_ONLY].join("---\n"));
    await writeFile(
      join(dir, "pods.yaml"),
      ["shop", "other"]
        .map(
          (ns) =>
            `apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ${ns}}\nspec:\n  containers: [{name: web, image: "quay.io/web@sha256:${"a".repeat(64)}"}]\n`,
        )
        .join("---\n"),
    );
    await writeFile(
      join(dir, "imprimatur-test.yaml"),
      `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: namespaced}
policies: [policies.yaml]
resources: [pods.yaml]
results:
  - {resource: Pod/web, namespace: shop, result: denied, policy: shop/corp-only, rule: default}
  - {resource: Pod/web, namespace: other, result: allowed, policy: shop/corp-only}
`,
    );
    const r = spawnSync(process.execPath, [BIN, "test", dir], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stdout + r.stderr);
  });
});
