// What the request-match tests share: a compiled matchConstraints that must load cleanly, and a Pod creation
// request with room for the fields a test changes.
import assert from "node:assert/strict";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import { compileRequestMatch } from "../../src/core/request-match/compile-request-match.ts";
import type { RequestMatch } from "../../src/core/request-match/request-match.ts";

/** The RequestMatch of a policy spec that has no load errors (asserted). */
export function compiledMatch(spec: Record<string, unknown>): RequestMatch {
  const { match, issues } = compileRequestMatch(spec);
  assert.deepEqual(issues, []);
  assert.ok(match);
  return match;
}

/** alice (of developers) creates Pod team-a/p labelled app=web; `extra` replaces whole fields. */
export const podCreate = (extra: Partial<AdmissionRequest> = {}): AdmissionRequest => ({
  uid: "u",
  operation: "CREATE",
  namespace: "team-a",
  kind: { group: "", version: "v1", kind: "Pod" },
  resource: { group: "", version: "v1", resource: "pods" },
  userInfo: { username: "alice", groups: ["developers", "system:authenticated"] },
  object: { apiVersion: "v1", kind: "Pod", metadata: { name: "p", labels: { app: "web" } }, spec: { containers: [] } },
  ...extra,
});
