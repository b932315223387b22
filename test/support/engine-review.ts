// Tests that hold a subject or a request they built drive the engine through its one entry point, review(); these
// say what they ask for in the words the tests use.
import assert from "node:assert/strict";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import type { AdmissionSubject, RequestUser, SubjectPlan } from "../../src/core/admission-subject.ts";
import type { Caller } from "../../src/audit/caller.ts";
import type { Decision } from "../../src/core/decision.ts";
import type { AdmissionCall } from "../../src/engine/admission-call.ts";
import type { Engine } from "../../src/engine/engine.ts";
import type { Reviewable } from "../../src/engine/review-routing.ts";

/** The decision on a subject, as /validate (or the call's endpoint other than /mutate) gives it. */
export async function validateSubject(engine: Engine, subject: AdmissionSubject, call: AdmissionCall): Promise<Decision> {
  assert.notEqual(call.endpoint, "mutate", "validateSubject is for /validate and its kin");
  const { decision } = await engine.review({ kind: "subject", subject }, call);
  assert.ok(decision, "a subject on /validate always gets a decision");
  return decision;
}

/** /mutate on a subject: undefined when it has nothing to pin or record. */
export async function mutateSubject(engine: Engine, subject: AdmissionSubject, call: AdmissionCall): Promise<Decision | undefined> {
  assert.equal(call.endpoint, "mutate");
  return (await engine.review({ kind: "subject", subject }, call)).decision;
}

/** What the engine made of a request: the subject it reviewed, or why it reviewed nothing. */
export async function planOfRequest(engine: Engine, request: AdmissionRequest, caller?: Caller): Promise<SubjectPlan> {
  return planOf(engine, { kind: "admission", request }, caller);
}

/** What the engine made of a manifest checked as if created. */
export async function planOfObject(engine: Engine, object: Record<string, unknown>, namespace?: string, user?: RequestUser): Promise<SubjectPlan> {
  return planOf(engine, { kind: "object", object, namespace, user });
}

async function planOf(engine: Engine, input: Reviewable, caller?: Caller): Promise<SubjectPlan> {
  const reviewed = await engine.review(input, { endpoint: "check", deadline: Date.now() + 10_000, dryRun: true, ...(caller ? { caller } : {}) });
  return reviewed.subject ? { review: true, subject: reviewed.subject } : { review: false, why: reviewed.skipped ?? "" };
}
