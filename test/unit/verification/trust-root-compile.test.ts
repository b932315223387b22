// The TrustRoot kind's compile step (src/core/trust-root/trust-root-kind.ts) called directly: every document it
// refuses, with the field and the exact reason, and the roots it accepts (inline, as text, from a file; with only
// logs or only timestamp authorities).
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseTrustedRoot, trustRootKind, type TrustRoot } from "../../../src/core/trust-root/trust-root-kind.ts";
import { embeddedTrustedRootJson } from "../../../src/verification/trust-roots.ts";

type RootJson = Record<string, unknown> & { tlogs: Array<Record<string, unknown>> };
const rootJson = () => structuredClone(embeddedTrustedRootJson()) as RootJson;
const source = { origin: "roots.yaml", document: 1 };

function compile(document: Record<string, unknown>, related?: (path: string) => string) {
  return trustRootKind.compile({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", ...document }, { source, ...(related ? { related } : {}) });
}
const issues = (document: Record<string, unknown>, related?: (path: string) => string) =>
  compile(document, related).issues.map((i) => `${i.path.join(".")}: ${i.message}`);
const valid = (name: string) => ({ metadata: { name }, spec: { trustedRoot: rootJson() } });

test("a trust root given inline, as JSON text, or in a file next to the policy loads under its name", () => {
  for (const [document, related] of [
    [valid("corp"), undefined],
    [{ metadata: { name: "corp" }, spec: { trustedRoot: JSON.stringify(rootJson()) } }, undefined],
    [{ metadata: { name: "corp" }, spec: { path: "root.json" } }, (p: string) => (p === "root.json" ? JSON.stringify(rootJson()) : "")],
  ] as const) {
    const { policy, issues: found } = compile(document, related);
    assert.deepEqual(found, []);
    assert.equal(policy?.name, "corp");
    assert.deepEqual(policy?.source, source);
    assert.equal(policy?.hasCtLogs, true);
  }
});

test("names are lowercase DNS-style: one character will do; anything else is refused, and nothing loads", () => {
  assert.deepEqual(issues(valid("a")), []);
  assert.deepEqual(issues(valid("corp.example-1")), []);
  for (const name of ["Corp", "corp-", "-corp", "corp.", "co rp", "", 5]) {
    const { policy, issues: found } = compile(valid(name as string));
    assert.equal(policy, undefined, String(name));
    assert.deepEqual(
      found.map((i) => [i.path.join("."), i.message]),
      [["metadata.name", "must be a lowercase DNS-style name"]],
      String(name),
    );
  }
  assert.deepEqual(issues({ spec: { trustedRoot: rootJson() } }), ["metadata.name: must be a lowercase DNS-style name"]);
});

test("unknown fields, at the top and in spec, are refused by name", () => {
  assert.deepEqual(issues({ ...valid("corp"), extra: 1 }), ['extra: unknown field "extra"']);
  assert.deepEqual(issues({ metadata: { name: "corp" }, spec: { trustedRoot: rootJson(), extra: 1 } }), ['spec.extra: unknown field "extra"']);
});

test("an unknown field that is a slip of a known one names it", () => {
  for (const [typo, meant] of [
    ["apiversion", "apiVersion"],
    ["Kind", "kind"],
    ["metdata", "metadata"],
    ["Spec", "spec"],
  ] as const)
    assert.deepEqual(issues({ ...valid("corp"), [typo]: 1 }), [`${typo}: unknown field "${typo}"; did you mean "${meant}"?`]);
  for (const [typo, meant] of [
    ["trustedroot", "trustedRoot"],
    ["Path", "path"],
  ] as const)
    assert.deepEqual(issues({ metadata: { name: "corp" }, spec: { trustedRoot: rootJson(), [typo]: 1 } }), [
      `spec.${typo}: unknown field "${typo}"; did you mean "${meant}"?`,
    ]);
});

test("spec must be an object with exactly one of trustedRoot and path", () => {
  const missing = 'spec: missing required field "spec" with trustedRoot (the trusted_root.json content) or path (a file next to this policy)';
  for (const spec of [undefined, null, [], "x"]) assert.deepEqual(issues({ metadata: { name: "corp" }, spec }), [missing], JSON.stringify(spec));
  const exactlyOne = "spec: give exactly one of trustedRoot (the trusted_root.json content) and path (a file next to this policy)";
  assert.deepEqual(issues({ metadata: { name: "corp" }, spec: { trustedRoot: rootJson(), path: "root.json" } }), [exactlyOne]);
});

test("a path must name a readable JSON file, and only policies loaded from files may name one", () => {
  const named = (path: unknown) => ({ metadata: { name: "corp" }, spec: { path } });
  assert.deepEqual(
    issues(named(""), () => "{}"),
    ["spec.path: must be a file path"],
  );
  assert.deepEqual(
    issues(named(5), () => "{}"),
    ["spec.path: must be a file path"],
  );
  assert.deepEqual(issues(named("root.json")), ["spec.path: files can only be named by policies loaded from files"]);
  const [unreadable] = issues(named("root.json"), () => {
    throw new Error("no such file");
  });
  assert.equal(unreadable, 'spec.path: cannot read "root.json" as JSON: no such file');
  assert.match(issues(named("root.json"), () => "{")[0] ?? "", /^spec\.path: cannot read "root\.json" as JSON: /);
  assert.match(issues({ metadata: { name: "corp" }, spec: { trustedRoot: "{" } })[0] ?? "", /^spec\.trustedRoot: not JSON: /);
});

test("a trusted root document: an object of a known media type, with something to verify against", () => {
  for (const json of [[], null, "x", 5]) assert.deepEqual(parseTrustedRoot(json), { error: "a trusted root must be a JSON object (trusted_root.json)" });
  const mediaTypes = "application/vnd.dev.sigstore.trustedroot+json;version=0.1, application/vnd.dev.sigstore.trustedroot.v0.2+json";
  assert.deepEqual(parseTrustedRoot({ ...rootJson(), mediaType: undefined }), { error: `mediaType must be one of ${mediaTypes}, got null` });
  assert.deepEqual(parseTrustedRoot({ ...rootJson(), mediaType: "v3" }), { error: `mediaType must be one of ${mediaTypes}, got "v3"` });
  assert.ok(!("error" in parseTrustedRoot({ ...rootJson(), mediaType: "application/vnd.dev.sigstore.trustedroot.v0.2+json" })));

  const only = (keep: string) => {
    const root = rootJson();
    for (const list of ["tlogs", "ctlogs", "certificateAuthorities", "timestampAuthorities"]) if (list !== keep) root[list] = [];
    return parseTrustedRoot(root);
  };
  for (const list of ["tlogs", "certificateAuthorities", "timestampAuthorities"]) {
    const parsed = only(list);
    assert.ok(!("error" in parsed), `${list} alone is something to verify against`);
    assert.equal((parsed as Omit<TrustRoot, "name">).hasCtLogs, false, "no CT logs listed");
  }
});

test("a validity range that is missing, not an object, or has an empty start is refused, naming the field", () => {
  const withTlog = (tlog: unknown) => ({ ...rootJson(), tlogs: [tlog] });
  const refused = { error: "tlogs[0].publicKey.validFor.start is missing: every key and CA in a trusted root must say from when it is valid" };
  for (const tlog of [5, null, { publicKey: null }, { publicKey: 5 }, { publicKey: { validFor: null } }, { publicKey: { validFor: { start: "" } } }]) {
    assert.deepEqual(parseTrustedRoot(withTlog(tlog)), refused, JSON.stringify(tlog));
  }
});

test("loaded roots are found by name; a trust root never needs namespace labels", () => {
  const a = compile(valid("a")).policy!;
  const b = compile(valid("b")).policy!;
  const prepared = trustRootKind.prepare([a, b]);
  assert.equal(prepared.get("a"), a);
  assert.equal(prepared.get("b"), b);
  assert.equal(trustRootKind.usesNamespaceLabels(prepared), false);
  assert.equal(trustRootKind.kind, "TrustRoot", "the kind policies are written with");
});
