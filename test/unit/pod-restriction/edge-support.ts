// What the PodRestriction edge tests share: a policy compiled from a spec, a pod built from a pod spec through
// the one extraction (podsInObject), the findings of one against the other, and findings as "field: message".
import assert from "node:assert/strict";
import { compilePodRestriction, podRestrictionFindings, type PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import type { CompileIssue, Finding } from "../../../src/core/pod-restriction/restrictions/restriction-support.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";

/** A PodRestriction named "p" with this `spec`, compiled: the policy, or the issues that stop it. */
export function compileRestriction(spec: unknown): { policy?: PodRestriction; issues: CompileIssue[] } {
  return compilePodRestriction({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "p" }, spec });
}

/** The same, asserting that it compiles with no issue. */
export function restrictionOf(spec: unknown): PodRestriction {
  const r = compileRestriction(spec);
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

/** The Pod with this pod spec, as the pipeline hands it to PodRestrictions. */
export function podUnder(spec: Record<string, unknown>): PodUnderReview {
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod" }, spec });
  assert.ok(pod);
  return pod;
}

export function findingsFor(p: PodRestriction, spec: Record<string, unknown>): Finding[] {
  return podRestrictionFindings(p, podUnder(spec));
}

export const fieldsOf = (out: Finding[]): string[] => out.map((f) => `${f.field}: ${f.message}`);

/** A container every restriction in these tests allows unless it says otherwise. */
export const APP = { name: "app", image: "registry.example.com/app:1.0" };
