// Edges of StringRestriction: anchored regular expressions, several wildcard entries, values that look like
// paths in fields that are not paths (matched as written, never normalised), host path prefixes ("/" covers
// everything, "/var/log" does not cover "/var/logs"), long allowed lists shortened in messages, and load errors.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { APP, compileRestriction, fieldsOf, findingsFor, restrictionOf } from "./edge-support.ts";

const compile = (spec: unknown) => compileRestriction({ spec });
const policy = (spec: unknown) => restrictionOf({ spec });
const findings = findingsFor;
const app = APP;
const account = (p: PodRestriction, serviceAccountName: string) => fieldsOf(findings(p, { containers: [app], serviceAccountName }));

describe("string values", () => {
  it("a regex must match the whole value", () => {
    const p = policy({ serviceAccountName: { regex: "web-[0-9]+" } });
    assert.deepEqual(account(p, "web-1"), []);
    assert.deepEqual(account(p, "xweb-1"), ['spec.serviceAccountName: is "xweb-1"; must match ^(?:web-[0-9]+)$']);
    assert.equal(account(p, "web-1x").length, 1);
  });

  it("a regex is read with Unicode semantics: property escapes work", () => {
    const p = policy({ serviceAccountName: { regex: "\\p{Ll}+" } });
    assert.deepEqual(account(p, "web"), []);
    assert.deepEqual(account(p, "Web"), ['spec.serviceAccountName: is "Web"; must match ^(?:\\p{Ll}+)$']);
  });

  it("a value too long to match within the regex work limit is a finding with the engine's reason, not a pass", () => {
    const p = policy({ serviceAccountName: { regex: "web-[0-9]+" } });
    const long = `web-${"1".repeat(2_000_000)}`;
    const found = account(p, long);
    assert.equal(found.length, 1);
    assert.equal(
      found[0],
      "spec.serviceAccountName: a value of 2000004 characters is too long to match against /web-[0-9]+/ (at most 1250000 for a pattern of 8 instructions)",
    );
  });

  it("a value passes when any of several wildcard entries matches", () => {
    const p = policy({ serviceAccountName: { allowed: ["web-*", "api-*"] } });
    assert.deepEqual(account(p, "web-1"), []);
    assert.deepEqual(account(p, "api-1"), []);
    assert.deepEqual(account(p, "db-1"), ['spec.serviceAccountName: is "db-1"; allowed: "web-*", "api-*"']);
  });

  it("a value with path segments in a field that is not a path is matched as written", () => {
    const p = policy({ serviceAccountName: { allowed: ["app"] } });
    assert.deepEqual(account(p, "x/../app"), ['spec.serviceAccountName: is "x/../app"; allowed: "app"']);
    const forbidding = policy({ serviceAccountName: { forbidden: ["admin"] } });
    assert.deepEqual(account(forbidding, "x/../admin"), []);
  });

  it("a long allowed list is shortened to its first twelve entries in the message", () => {
    const names = Array.from({ length: 13 }, (_, i) => `sa-${i}`);
    const p = policy({ serviceAccountName: { allowed: names } });
    const [message] = account(p, "other");
    assert.ok(message!.endsWith(`"sa-10", "sa-11", … (13 in all)`), message);
    assert.ok(!message!.includes('"sa-12"'), message);
    const twelve = policy({ serviceAccountName: { allowed: names.slice(0, 12) } });
    assert.ok(account(twelve, "other")[0]!.endsWith('"sa-10", "sa-11"'));
  });

  it("forbidden that is not a list, and a regex that is not a string, are load errors naming the field", () => {
    for (const [restriction, field] of [
      [{ forbidden: "admin" }, "forbidden"],
      [{ regex: 3 }, "regex"],
      [{ regex: "(" }, "regex"],
    ] as const) {
      const r = compile({ serviceAccountName: restriction });
      assert.equal(r.policy, undefined);
      assert.deepEqual(
        r.issues.map((i) => i.path.join(".")),
        [`spec.spec.serviceAccountName.${field}`],
      );
    }
  });
});

describe("load errors say what was found", () => {
  it("a list of strings that is not a list", () => {
    const r = compile({ serviceAccountName: { allowed: "app" } });
    assert.deepEqual(
      r.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      ['spec.spec.serviceAccountName.allowed: must be a list of strings, got "app"'],
    );
  });

  it("a list of alternatives that is neither a list nor a mapping", () => {
    const r = compile({ containers: 5 });
    assert.deepEqual(
      r.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      ["spec.spec.containers: must be a list of mappings (or one mapping), got 5"],
    );
  });
});

describe("host path prefixes", () => {
  const hostPath = (p: PodRestriction, path: string) => findings(p, { containers: [app], volumes: [{ name: "h", hostPath: { path } }] });

  it('"/" covers every path', () => {
    const p = policy({ volumes: { hostPath: { path: { allowed: ["/"] } } } });
    assert.deepEqual(hostPath(p, "/var/log"), []);
    assert.deepEqual(hostPath(p, "/"), []);
  });

  it('"/" covers relative paths too (the API server accepts them): allowing it allows them, forbidding it forbids them', () => {
    assert.deepEqual(hostPath(policy({ volumes: { hostPath: { path: { allowed: ["/"] } } } }), "var/log"), []);
    const forbidding = policy({ volumes: { hostPath: { path: { forbidden: ["/"] } } } });
    assert.deepEqual(
      hostPath(forbidding, "var/log").map((f) => f.message),
      ['is "var/log", which is forbidden'],
    );
  });

  it("an empty prefix is a prefix of every absolute path: forbidding it forbids them", () => {
    const p = policy({ volumes: { hostPath: { path: { forbidden: [""] } } } });
    assert.deepEqual(
      hostPath(p, "/etc").map((f) => f.message),
      ['is "/etc", which is forbidden'],
    );
  });

  it("a prefix covers itself and what is below it, not a sibling sharing its spelling", () => {
    const p = policy({ volumes: { hostPath: { path: { allowed: ["/var/log/"] } } } });
    assert.deepEqual(hostPath(p, "/var/log"), []);
    assert.deepEqual(hostPath(p, "/var/log/app"), []);
    assert.deepEqual(
      hostPath(p, "/var/logs").map((f) => f.field),
      ["spec.volumes[0].hostPath.path"],
    );
    assert.equal(hostPath(p, "/var/log/../../etc").length, 1);
  });
});
