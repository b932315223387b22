// Edges of the rules every restriction shares, as a policy author meets them: load errors of the nil rules and
// of string maps name the key that is wrong, a field that must be unset is reported once (as set, not also for
// its value), and a range with neither end reads "any number" in the message about an unset field.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { APP, compileRestriction, fieldsOf, findingsFor, restrictionOf } from "./edge-support.ts";

const issuesOf = (spec: unknown) => compileRestriction({ spec }).issues.map((i) => `${i.path.join(".")}: ${i.message}`);

describe("nil rules", () => {
  it("allowNil and requireNil that are not booleans are load errors naming the key", () => {
    assert.deepEqual(issuesOf({ containers: [{ securityContext: { runAsUser: { allowNil: "yes", requireNil: "no" } } }] }), [
      'spec.spec.containers.0.securityContext.runAsUser.allowNil: must be true or false, got "yes"',
      'spec.spec.containers.0.securityContext.runAsUser.requireNil: must be true or false, got "no"',
    ]);
  });

  it("a number that must be unset is reported once when set, not also for its value", () => {
    const p = restrictionOf({ spec: { containers: [{ securityContext: { runAsUser: { requireNil: true, ranges: [{ min: 5 }] } } }] } });
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [{ ...APP, securityContext: { runAsUser: 3 } }] })), [
      "spec.containers[0].securityContext.runAsUser: is set to 3; must be unset",
    ]);
  });
});

describe("numeric ranges", () => {
  it("a range with neither end requires only that the number is set, and says so", () => {
    const p = restrictionOf({ spec: { containers: [{ securityContext: { runAsUser: { ranges: [{}] } } }] } });
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [APP] })), ["spec.containers[0].securityContext.runAsUser: is unset; must be set (any number)"]);
    assert.deepEqual(findingsFor(p, { containers: [{ ...APP, securityContext: { runAsUser: 0 } }] }), []);
  });
});

describe("string maps", () => {
  it("a restriction that is not a mapping is a load error, not a crash", () => {
    assert.deepEqual(issuesOf({ nodeSelector: 5 }), ["spec.spec.nodeSelector: must be a mapping, got 5"]);
  });

  it("allowedKeys and forbiddenKeys that are not lists are load errors naming the key", () => {
    assert.deepEqual(issuesOf({ nodeSelector: { allowedKeys: "a", forbiddenKeys: 3 } }), [
      'spec.spec.nodeSelector.allowedKeys: must be a list of strings, got "a"',
      "spec.spec.nodeSelector.forbiddenKeys: must be a list of strings, got 3",
    ]);
  });
});
