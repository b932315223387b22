// The PodRestriction entry of the policy-kind registry (podRestrictionKind): its name and API versions, compiling
// with and without the shipped profiles, whether it needs namespace labels, and which subjects it judges: none
// when pods are not to be judged or no restriction is loaded, never the imagePaths entry, every pod otherwise.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { AdmissionSubject, SubjectPod } from "../../../src/core/admission-subject.ts";
import { podRestrictionKind } from "../../../src/core/pod-restriction/pod-restriction-kind.ts";
import type { PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { POLICY_API_VERSION } from "../../../src/core/policy-kind.ts";
import { profileSources, shippedProfiles } from "../../../src/policy/profiles.ts";

const SOURCE = { origin: "restrictions.yaml", document: 2 };

function compiled(spec: unknown, extra: Record<string, unknown> = {}): PodRestriction {
  const r = podRestrictionKind.compile(
    { apiVersion: POLICY_API_VERSION, kind: "PodRestriction", metadata: { name: "no-privileged" }, spec, ...extra },
    { source: SOURCE },
  );
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

const noPrivileged = { spec: { containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }] } };

function subjectPod(containers: unknown[], index = 0): SubjectPod {
  return {
    metadata: { value: { name: `pod-${index}` }, field: "metadata" },
    spec: { value: { containers }, field: "spec" },
    annotations: {},
  } as SubjectPod;
}

function subject(pods: SubjectPod[], judgePods = true): AdmissionSubject {
  return { origin: "object", namespace: "team-a", object: { apiVersion: "v1", kind: "Pod", name: "web" }, pods, images: [], judgePods, request: { uid: "" } };
}

const plain = { name: "app", image: "nginx" };
const privileged = { name: "app", image: "nginx", securityContext: { privileged: true } };

describe("podRestrictionKind", () => {
  it("is registered as the PodRestriction kind, in the project's and the design's API versions", () => {
    assert.equal(podRestrictionKind.kind, "PodRestriction");
    assert.deepEqual([...podRestrictionKind.apiVersions], [POLICY_API_VERSION, "policy/v1alpha1"]);
  });

  it("compiles a document and records where it came from", () => {
    const p = compiled(noPrivileged);
    assert.equal(p.name, "no-privileged");
    assert.deepEqual(p.source, SOURCE);
  });

  describe("with the shipped profiles", () => {
    let profiles: ReadonlyMap<string, unknown>;
    before(async () => {
      profiles = profileSources(await shippedProfiles());
    });

    it("includes a profile by name when the profiles are at hand", () => {
      const r = podRestrictionKind.compile(
        { apiVersion: POLICY_API_VERSION, kind: "PodRestriction", metadata: { name: "base" }, spec: { profile: "baseline" } },
        { source: SOURCE, profiles },
      );
      assert.deepEqual(r.issues, []);
      assert.deepEqual(r.policy?.profiles, ["baseline"]);
      const index = podRestrictionKind.prepare([r.policy!]);
      const d = podRestrictionKind.evaluate!(index, subject([subjectPod([privileged])]), {});
      assert.equal(d?.allowed, false);
      assert.ok(
        d.violations.some((v) => v.policy === "base" && v.field === "spec.containers[0].securityContext.privileged"),
        JSON.stringify(d.violations),
      );
    });

    it("without them, a profile is unknown and the load error says so", () => {
      const r = podRestrictionKind.compile(
        { apiVersion: POLICY_API_VERSION, kind: "PodRestriction", metadata: { name: "base" }, spec: { profile: "baseline" } },
        { source: SOURCE },
      );
      assert.equal(r.policy, undefined);
      assert.ok(
        r.issues.some((i) => i.message.includes('unknown profile "baseline"')),
        JSON.stringify(r.issues),
      );
    });
  });

  it("needs namespace labels only when some restriction binds by namespaceSelector", () => {
    const everywhere = compiled(noPrivileged);
    const selected = compiled(noPrivileged, { binding: { namespaceSelector: { matchLabels: { tier: "prod" } } } });
    assert.equal(podRestrictionKind.usesNamespaceLabels(podRestrictionKind.prepare([everywhere])), false);
    assert.equal(podRestrictionKind.usesNamespaceLabels(podRestrictionKind.prepare([everywhere, selected])), true);
  });

  describe("evaluate", () => {
    const index = podRestrictionKind.prepare([compiled(noPrivileged)]);

    it("denies a privileged pod, naming the field and the policy", () => {
      const d = podRestrictionKind.evaluate!(index, subject([subjectPod([privileged])]), {});
      assert.equal(d?.allowed, false);
      assert.deepEqual(
        d.violations.map((v) => [v.policy, v.field]),
        [["no-privileged", "spec.containers[0].securityContext.privileged"]],
      );
    });

    it("admits a pod that satisfies every restriction", () => {
      const d = podRestrictionKind.evaluate!(index, subject([subjectPod([plain])]), {});
      assert.equal(d?.allowed, true);
    });

    it("judges every pod of the subject: one denied pod denies the whole object", () => {
      const d = podRestrictionKind.evaluate!(index, subject([subjectPod([plain], 0), subjectPod([privileged], 1)]), {});
      assert.equal(d?.allowed, false);
      assert.equal(d.violations.length, 1);
    });

    it("says nothing when the subject's pods are not to be judged", () => {
      assert.equal(podRestrictionKind.evaluate!(index, subject([subjectPod([privileged])], false), {}), undefined);
    });

    it("says nothing when no PodRestriction is loaded", () => {
      const empty = podRestrictionKind.prepare([]);
      assert.equal(podRestrictionKind.evaluate!(empty, subject([subjectPod([privileged])]), {}), undefined);
    });

    it("does not judge the imagePaths entry, which is not a pod", () => {
      const outside = { ...subjectPod([privileged]), pathImages: [] } as SubjectPod;
      assert.equal(podRestrictionKind.evaluate!(index, subject([outside]), {}), undefined);
      const d = podRestrictionKind.evaluate!(index, subject([outside, subjectPod([plain], 1)]), {});
      assert.equal(d?.allowed, true);
      const denied = podRestrictionKind.evaluate!(index, subject([subjectPod([privileged], 0), outside]), {});
      assert.equal(denied?.allowed, false);
    });

    it("says nothing for a subject without pods (an ImageReview's images)", () => {
      assert.equal(podRestrictionKind.evaluate!(index, subject([]), {}), undefined);
    });
  });
});
