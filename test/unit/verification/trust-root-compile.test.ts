// The TrustRoot kind's compile step (src/core/trust-root/trust-root-kind.ts) called directly: every document it
// refuses, with the field and the exact reason, and the roots it accepts (inline, as text, from a file; with only
// logs or only timestamp authorities).
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { parseTrustedRoot, trustRootKind, type SigstoreTrust } from "../../../src/core/trust-root/trust-root-kind.ts";
import { embeddedTrustedRootJson } from "../../../src/verification/trust-roots.ts";
import { codeSigningChain, createRoot } from "../../support/notation/test-pki.ts";

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
    assert.equal(policy?.sigstore?.hasCtLogs, true);
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

test("spec must be an object with trustedRoot or path, notation, or both", () => {
  const needed = "trustedRoot (the trusted_root.json content) or path (a file next to this policy), notation (Notary Project certificates), or both";
  for (const spec of [undefined, null, [], "x"])
    assert.deepEqual(issues({ metadata: { name: "corp" }, spec }), [`spec: missing required field "spec" with ${needed}`], JSON.stringify(spec));
  assert.deepEqual(issues({ metadata: { name: "corp" }, spec: {} }), [`spec: give ${needed}`]);
  const notBoth = "spec: give trustedRoot (the trusted_root.json content) or path (a file next to this policy), not both";
  assert.deepEqual(issues({ metadata: { name: "corp" }, spec: { trustedRoot: rootJson(), path: "root.json" } }), [notBoth]);
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
    assert.equal((parsed as SigstoreTrust).hasCtLogs, false, "no CT logs listed");
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

describe("spec.notation: Notary Project trust stores", () => {
  let pki: Awaited<ReturnType<typeof codeSigningChain>>;
  let tsaRoot: Awaited<ReturnType<typeof createRoot>>;
  before(async () => {
    pki = await codeSigningChain();
    tsaRoot = await createRoot({ subject: "C=US, ST=WA, O=Example, CN=Example TSA Root" });
  });
  const named = (notation: unknown) => ({ metadata: { name: "acme" }, spec: { notation } });

  test("inline or from files, alone or beside a Sigstore root: each store's certificates", () => {
    const inline = compile(named({ certs: pki.root.pem, tsaCerts: tsaRoot.pem }));
    assert.deepEqual(inline.issues, []);
    assert.equal(inline.policy?.sigstore, undefined);
    assert.deepEqual(
      inline.policy?.notation?.ca.map((d) => Buffer.from(d).equals(Buffer.from(pki.root.der))),
      [true],
    );
    assert.equal(inline.policy?.notation?.tsa.length, 1);
    assert.equal(inline.policy?.notation?.signingAuthority.length, 0);
    const files = { "roots.pem": pki.root.pem };
    const fromFile = compile({ metadata: { name: "acme" }, spec: { trustedRoot: rootJson(), notation: { signingAuthorityCertsRef: "roots.pem" } } }, (p) => {
      if (!(p in files)) throw new Error("ENOENT");
      return files[p as keyof typeof files];
    });
    assert.deepEqual(fromFile.issues, []);
    assert.equal(fromFile.policy?.sigstore?.hasCtLogs, true);
    assert.equal(fromFile.policy?.notation?.signingAuthority.length, 1);
  });

  test("every mistake is refused with its field: not a mapping, unknown or empty fields, no trust store, Secrets, a store that is not a CA", () => {
    assert.deepEqual(issues(named("PEM")), ["spec.notation: must be a mapping of certs, signingAuthorityCerts and tsaCerts (PEM), or their *Ref files"]);
    assert.deepEqual(issues(named({ certs: pki.root.pem, cert: "x" })), ['spec.notation.cert: unknown field "cert"; did you mean "certs"?']);
    assert.deepEqual(issues(named({ certs: "" })), ["spec.notation.certs: must be a non-empty string"]);
    assert.deepEqual(issues(named({ tsaCerts: tsaRoot.pem })), [
      "spec.notation: give the certificates signatures must chain to: certs (or certsRef), or signingAuthorityCerts (or signingAuthorityCertsRef)",
    ]);
    assert.deepEqual(issues(named({ certsRef: "k8s://security/roots" })), [
      "spec.notation.certsRef: give the certificates inline or in a file next to this policy; Secrets are named by a policy's notary entry",
    ]);
    assert.match(issues(named({ certs: pki.leaf.pem })).join("\n"), /^spec\.notation\.certs: certificate 0 \(.*\) is neither a CA nor self-signed/);
    assert.match(
      issues(named({ certs: pki.root.pem, tsaCerts: pki.intermediate.pem })).join("\n"),
      /^spec\.notation\.tsaCerts: certificate 0 .* is not a self-signed root/,
    );
  });
});
