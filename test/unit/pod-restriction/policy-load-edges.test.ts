// Edges of loading a PodRestriction (compilePodRestriction: the JSON Schema, then binding.ts and the compiler): the
// policy name, description annotation, clusters, profile inclusion and binding errors, each a load error naming the
// field; which
// namespaces a binding's selector binds (restriction-index.ts); and a pod-level setting inherited by several
// containers reported once.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { decidePodRestrictions } from "../../../src/core/pod-restriction/pod-restriction-decision.ts";
import { compilePodRestriction, podRestrictionFindings, type PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import type { CompileIssue } from "../../../src/core/pod-restriction/restrictions/restriction-support.ts";
import { PodRestrictionIndex } from "../../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import { profileSources, shippedProfiles } from "../../../src/policy/profiles.ts";

type Doc = Record<string, unknown>;

function doc(extra: Doc = {}, name: unknown = "p"): Doc {
  return { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name }, spec: {}, ...extra };
}

function loaded(raw: unknown, profiles?: ReadonlyMap<string, unknown>): PodRestriction {
  const r = compilePodRestriction(raw, profiles ? { profiles } : {});
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

/** The one load error, as "path: message". */
function loadError(raw: unknown, profiles?: ReadonlyMap<string, unknown>): string {
  const r: { policy?: PodRestriction; issues: CompileIssue[] } = compilePodRestriction(raw, profiles ? { profiles } : {});
  assert.equal(r.policy, undefined);
  assert.equal(r.issues.length, 1, JSON.stringify(r.issues));
  return `${r.issues[0]!.path.join(".")}: ${r.issues[0]!.message}`;
}

function pod(spec: Record<string, unknown>): PodUnderReview {
  const [p] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod" }, spec });
  assert.ok(p);
  return p;
}

const noPrivileged = { spec: { containers: { securityContext: { privileged: { allowNil: true, require: false } } } } };
const privilegedPod = pod({ containers: [{ name: "app", image: "nginx", securityContext: { privileged: true } }] });

describe("the policy document", () => {
  it("a document that is not a mapping is a load error", () => {
    const r = compilePodRestriction("PodRestriction");
    assert.equal(r.policy, undefined);
    assert.equal(r.issues.length, 1);
  });

  it("names must be lowercase DNS names of at most 253 characters", () => {
    assert.equal(loaded(doc({}, "a.b-c9")).name, "a.b-c9");
    assert.equal(loaded(doc({}, "x".repeat(253))).name.length, 253);
    const dnsName = "must be a lowercase DNS name (at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)";
    for (const bad of ["Web", "web-", "-web", "web_1", "web/1", ""]) {
      assert.equal(loadError(doc({}, bad)), `metadata.name: ${dnsName}, got ${JSON.stringify(bad)}`, bad);
    }
    assert.equal(loadError(doc({}, "x".repeat(254))), `metadata.name: ${dnsName}, got "${"x".repeat(75)}…"`, "a long name is cut");
    assert.equal(loadError(doc({}, 7)), `metadata.name: ${dnsName}, got 7`);
    assert.equal(
      loadError({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: {}, spec: {} }),
      'metadata: missing required field "name"',
    );
    assert.equal(loadError({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", spec: {} }), ': missing required field "metadata"');
  });

  it("metadata that is not a mapping is a load error, not a crash", () => {
    const r = compilePodRestriction({ ...doc(), metadata: "p" });
    assert.equal(r.policy, undefined);
    assert.ok(
      r.issues.some((i) => i.path.join(".") === "metadata"),
      JSON.stringify(r.issues),
    );
  });

  it("the description annotation is the policy's description; a non-string one is a load error, as any annotation", () => {
    const described = loaded({ ...doc(), metadata: { name: "p", annotations: { "imprimatur.dev/description": "no privileged pods" } } });
    assert.equal(described.description, "no privileged pods");
    assert.equal(
      loadError({ ...doc(), metadata: { name: "p", annotations: { "imprimatur.dev/description": 3 } } }),
      "metadata.annotations.imprimatur.dev/description: must be a string, got 3",
    );
    assert.equal(loaded(doc()).description, undefined);
  });

  it("spec that is not a mapping is a load error", () => {
    assert.ok(loadError(doc({ spec: "all" })).startsWith("spec: "));
  });

  it("clusters: a list names the clusters, an empty list is a load error", () => {
    assert.deepEqual(loaded(doc({ spec: { clusters: ["prod-eu"] } })).clusters, ["prod-eu"]);
    assert.equal(loaded(doc()).clusters, undefined);
    assert.equal(loadError(doc({ spec: { clusters: [] } })), "spec.clusters: must not be empty; leave it out for every cluster, and callers with no cluster");
  });
});

describe("profile inclusion", () => {
  let profiles: ReadonlyMap<string, unknown>;
  before(async () => {
    profiles = profileSources(await shippedProfiles());
  });

  it("restricted includes baseline: both are listed once, and a privileged pod is denied", () => {
    const p = loaded(doc({ spec: { profile: "restricted" } }), profiles);
    assert.deepEqual(p.profiles, ["restricted", "baseline"]);
    const d = decidePodRestrictions(new PodRestrictionIndex([p]), privilegedPod, "default", {});
    assert.equal(d.allowed, false);
    assert.ok(d.violations.some((v) => v.field === "spec.containers[0].securityContext.privileged"));
  });

  it("a profile name that is not a string names the shipped profiles", () => {
    assert.equal(loadError(doc({ spec: { profile: 1 } }), profiles), "spec.profile: must be a shipped profile to include: baseline or restricted, got 1");
    assert.equal(loadError(doc({ spec: { profile: "" } }), profiles), 'spec.profile: must be a shipped profile to include: baseline or restricted, got ""');
  });

  it("an unknown profile, with and without shipped profiles at hand", () => {
    assert.equal(loadError(doc({ spec: { profile: "strict" } }), profiles), 'spec.profile: unknown profile "strict"; shipped profiles: baseline, restricted');
    assert.equal(loadError(doc({ spec: { profile: "strict" } })), 'spec.profile: unknown profile "strict"; shipped profiles: none');
  });

  it("profiles given as a plain map are looked up by plain name, and an unknown one lists them", () => {
    const plain = new Map<string, unknown>([
      ["a", doc({ spec: noPrivileged }, "a")],
      ["b", doc({ spec: noPrivileged }, "b")],
    ]);
    assert.deepEqual(loaded(doc({ spec: { profile: "b" } }), plain).profiles, ["b"]);
    assert.equal(loadError(doc({ spec: { profile: "c" } }), plain), 'spec.profile: unknown profile "c"; shipped profiles: a, b');
  });

  it("a versioned profile name resolves through the shipped catalog; its checks keep the plain profile's labels", () => {
    const p = loaded(doc({ spec: { profile: "restricted@v1.25" } }), profiles);
    assert.deepEqual(p.profiles, ["restricted@v1.25", "baseline@v1.25"]);
    assert.ok(p.checks.some((c) => c.name === "restricted/runAsNonRoot"));
    // An override names the check by the plain profile's label, whatever version was asked for.
    const overridden = loaded(
      doc({
        spec: {
          profile: "restricted@v1.25",
          checks: [{ name: "mine", overrides: ["runAsNonRoot"], spec: { securityContext: { hostNetwork: { require: false } } } }],
        },
      }),
      profiles,
    );
    assert.equal(
      overridden.checks.some((c) => c.name === "restricted/runAsNonRoot"),
      false,
    );
    assert.ok(overridden.checks.some((c) => c.name === "mine"));
  });

  it("a profile that includes itself, directly or through another, is a load error naming the cycle", () => {
    const cyclic = new Map<string, unknown>([
      ["a", doc({ spec: { profile: "b" } }, "a")],
      ["b", doc({ spec: { profile: "a" } }, "b")],
    ]);
    assert.equal(
      loadError(doc({ spec: { profile: "a" } }), cyclic),
      'spec.profile: profile "a" does not compile: spec.profile: profile "b" does not compile: spec.profile: profile "a" includes itself (a → b → a)',
    );
  });

  it("a profile that does not compile is a load error with its reasons, each at its field", () => {
    const broken = new Map<string, unknown>([["broken", doc({ spec: { clusters: [] } }, "broken")]]);
    assert.equal(
      loadError(doc({ spec: { profile: "broken" } }), broken),
      'spec.profile: profile "broken" does not compile: spec.clusters: must not be empty; leave it out for every cluster, and callers with no cluster',
    );
  });
});

describe("binding", () => {
  const withBinding = (binding: unknown) => doc({ binding, spec: noPrivileged });

  it("no binding binds every namespace in Drop mode; a null one is a load error, as the schema says", () => {
    const p = loaded(doc({ spec: noPrivileged }));
    assert.equal(p.mode, "Drop");
    assert.equal(decidePodRestrictions(new PodRestrictionIndex([p]), privilegedPod, "anywhere", undefined).allowed, false);
    assert.equal(loadError(withBinding(null)), "binding: must be a mapping, got null");
  });

  it("Allow is the seed's spelling of Accept", () => {
    assert.equal(loaded(withBinding({ mode: "Allow" })).mode, "Accept");
    assert.equal(loaded(withBinding({ mode: "Drop" })).mode, "Drop");
  });

  const invalid: Array<{ name: string; binding: unknown; error: string }> = [
    { name: "a binding that is not a mapping", binding: "everywhere", error: "binding: " },
    { name: "an unknown mode", binding: { mode: "Deny" }, error: 'binding.mode: must be one of "Accept", "Allow", "Drop", got "Deny"' },
    { name: "namespaces that are not a list", binding: { namespaces: 3 }, error: "binding.namespaces: " },
    {
      name: "an empty namespaces list",
      binding: { namespaces: [] },
      error: "binding.namespaces: must not be empty; leave it out for every namespace (namespaceSelector still applies)",
    },
    { name: "a selector that is not a mapping", binding: { namespaceSelector: "prod" }, error: "binding.namespaceSelector: " },
    {
      name: "matchLabels with a non-string value",
      binding: { namespaceSelector: { matchLabels: { tier: "prod", replicas: 3 } } },
      error: "binding.namespaceSelector.matchLabels.replicas: must be a string, got 3",
    },
    {
      name: "matchExpressions that are not a list",
      binding: { namespaceSelector: { matchExpressions: {} } },
      error: "binding.namespaceSelector.matchExpressions: must be a list",
    },
    {
      name: "an expression that is not a mapping",
      binding: { namespaceSelector: { matchExpressions: ["tier"] } },
      error: "binding.namespaceSelector.matchExpressions.0: ",
    },
    {
      name: "an empty key",
      binding: { namespaceSelector: { matchExpressions: [{ key: "", operator: "Exists" }] } },
      error: "binding.namespaceSelector.matchExpressions.0.key: must not be empty",
    },
    {
      name: "a key that is not a string",
      binding: { namespaceSelector: { matchExpressions: [{ key: 5, operator: "Exists" }] } },
      error: "binding.namespaceSelector.matchExpressions.0.key: must be a string, got 5",
    },
    {
      name: "values that are not a list",
      binding: { namespaceSelector: { matchExpressions: [{ key: "tier", operator: "In", values: "prod" }] } },
      error: "binding.namespaceSelector.matchExpressions.0.values: ",
    },
  ];
  for (const t of invalid) {
    it(`${t.name} is a load error naming the field`, () => {
      const r = compilePodRestriction(withBinding(t.binding));
      assert.equal(r.policy, undefined);
      assert.ok(
        r.issues.some((i) => `${i.path.join(".")}: ${i.message}`.startsWith(t.error)),
        JSON.stringify(r.issues),
      );
    });
  }
});

describe("which namespaces a selector binds", () => {
  const bound = (binding: unknown, labels: Record<string, string>) =>
    decidePodRestrictions(new PodRestrictionIndex([loaded(doc({ binding, spec: noPrivileged }))]), privilegedPod, "team-a", labels);

  it("Exists binds a namespace carrying the key, whatever its value", () => {
    const binding = { namespaceSelector: { matchExpressions: [{ key: "tier", operator: "Exists" }] } };
    assert.equal(bound(binding, { tier: "dev" }).allowed, false);
    assert.equal(bound(binding, { team: "a" }).allowed, true);
  });

  it("NotIn listed first binds a namespace with another value", () => {
    const binding = {
      namespaceSelector: {
        matchExpressions: [
          { key: "tier", operator: "NotIn", values: ["prod"] },
          { key: "team", operator: "Exists" },
        ],
      },
    };
    assert.equal(bound(binding, { tier: "dev", team: "a" }).allowed, false);
    assert.equal(bound(binding, { tier: "prod", team: "a" }).allowed, true);
    const notInOnly = { namespaceSelector: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["prod"] }] } };
    assert.equal(bound(notInOnly, { tier: "dev" }).allowed, false);
    assert.equal(bound(notInOnly, { tier: "prod" }).allowed, true);
  });

  it("In with a value listed twice binds once: one violation, not two", () => {
    const binding = { namespaceSelector: { matchExpressions: [{ key: "tier", operator: "In", values: ["prod", "prod"] }] } };
    const d = bound(binding, { tier: "prod" });
    assert.equal(d.allowed, false);
    assert.equal(d.violations.length, 1, JSON.stringify(d.violations));
  });
});

describe("findings", () => {
  it("a pod-level setting inherited by two containers is reported once", () => {
    const p = loaded(doc({ spec: { spec: { containers: { securityContext: { runAsNonRoot: { require: true } } } } } }));
    const out = podRestrictionFindings(
      p,
      pod({
        securityContext: { runAsNonRoot: false },
        containers: [
          { name: "a", image: "nginx" },
          { name: "b", image: "nginx" },
        ],
      }),
    );
    assert.equal(out.length, 1, JSON.stringify(out));
  });

  it("a pod whose containers only are known: conditions are not decided, every check applies, metadata is not judged", () => {
    const p = loaded(
      doc({
        spec: {
          metadata: { labels: { forbiddenKeys: ["debug"] } },
          checks: [{ name: "prod-only", when: { metadata: { labels: { requiredKeys: [{ env: "prod" }] } } }, ...noPrivileged }],
        },
      }),
    );
    const [whole] = podsInObject({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "pod", labels: { debug: "1" } },
      spec: { containers: [{ name: "app", image: "nginx", securityContext: { privileged: true } }] },
    });
    assert.ok(whole);
    assert.deepEqual(
      podRestrictionFindings(p, whole).map((f) => f.field),
      ["metadata.labels[debug]"],
    );
    assert.deepEqual(
      podRestrictionFindings(p, { ...whole, onlyContainers: true }).map((f) => f.field),
      ["spec.containers[0].securityContext.privileged"],
    );
  });
});
