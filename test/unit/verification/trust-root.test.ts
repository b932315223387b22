// The TrustRoot kind and the embedded public-good root: what loads, and what is refused with file and field.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { parseTrustedRoot } from "../../../src/core/trust-root/trust-root-kind.ts";
import { embeddedTrustedRootJson, publicGoodTrustRoot, trustRootNamed } from "../../../src/verification/trust-roots.ts";

test("the public-good root ships embedded: Fulcio CAs, Rekor and CT logs, usable offline", () => {
  const root = publicGoodTrustRoot();
  assert.equal(root.name, "sigstore-public-good");
  assert.ok(root.material.certificateAuthorities.length >= 1);
  assert.ok(root.material.tlogs.some((t) => t.baseURL === "https://rekor.sigstore.dev"));
  assert.equal(root.hasCtLogs, true);
  assert.equal(trustRootNamed(new Map(), "sigstore-public-good"), root);
  assert.equal(trustRootNamed(new Map(), "corp"), undefined);
});

test("a TrustRoot loads inline and replaces the embedded root under its name", () => {
  const json = JSON.stringify(embeddedTrustedRootJson());
  const { policies, errors } = parsePolicyText(
    `apiVersion: imprimatur.dev/v1alpha1\nkind: TrustRoot\nmetadata: {name: sigstore-public-good}\nspec:\n  trustedRoot: ${json}\n`,
    "root.yaml",
  );
  assert.deepEqual(errors, []);
  const loaded = policies.TrustRoot[0]!;
  assert.equal(trustRootNamed(new Map([[loaded.name, loaded]]), "sigstore-public-good"), loaded);
});

test("malformed trust roots are load errors naming file, line and field", () => {
  const cases: Array<[string, RegExp]> = [
    ["spec: {}", /^root\.yaml:4 spec: give exactly one of trustedRoot/],
    ["spec: {trustedRoot: {mediaType: nope}}", /^root\.yaml:4 spec\.trustedRoot: mediaType must be one of/],
    [
      'spec: {trustedRoot: {mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}}',
      /spec\.trustedRoot: it lists no certificate authority, transparency log or timestamp authority/,
    ],
    [
      'spec: {trustedRoot: {mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1", tlogs: [{baseUrl: x, publicKey: {rawBytes: "AAAA", keyDetails: PKIX_ECDSA_P256_SHA_256, validFor: {start: "2024-01-01T00:00:00Z"}}, logId: {keyId: "AAAA"}}]}}',
      /spec\.trustedRoot: not a valid trusted root/,
    ],
    ["spec: {path: root.json}", /spec\.path: files can only be named by policies loaded from files/],
    ["spec: {trustedRoot: {}, extra: 1}", /spec\.extra: unknown field "extra"/],
  ];
  for (const [spec, expected] of cases) {
    const { errors } = parsePolicyText(`apiVersion: imprimatur.dev/v1alpha1\nkind: TrustRoot\nmetadata: {name: corp}\n${spec}\n`, "root.yaml");
    assert.ok(errors.length > 0, spec);
    assert.match(errors.map((e) => `${e.origin}:${e.line} ${e.path}: ${e.message}`).join("\n"), expected);
  }
});

test("a log, CA or timestamp authority without a validity start is refused at load, naming the field", () => {
  const withoutStart = (edit: (root: TrustedRootJson) => void) => {
    const root = structuredClone(embeddedTrustedRootJson()) as TrustedRootJson;
    edit(root);
    return root;
  };
  const cases: Array<[TrustedRootJson, string]> = [
    [withoutStart((r) => delete r.tlogs[1]!.publicKey.validFor!.start), "tlogs[1].publicKey.validFor.start"],
    [withoutStart((r) => delete r.tlogs[0]!.publicKey.validFor), "tlogs[0].publicKey.validFor.start"],
    [withoutStart((r) => delete r.ctlogs[0]!.publicKey.validFor!.start), "ctlogs[0].publicKey.validFor.start"],
    [withoutStart((r) => delete r.certificateAuthorities[1]!.validFor!.start), "certificateAuthorities[1].validFor.start"],
    [withoutStart((r) => delete r.timestampAuthorities[0]!.validFor), "timestampAuthorities[0].validFor.start"],
  ];
  for (const [root, field] of cases) {
    const parsed = parseTrustedRoot(root);
    assert.ok("error" in parsed, field);
    assert.equal(parsed.error, `${field} is missing: every key and CA in a trusted root must say from when it is valid`);
    const { errors } = parsePolicyText(
      `apiVersion: imprimatur.dev/v1alpha1\nkind: TrustRoot\nmetadata: {name: corp}\nspec:\n  trustedRoot: ${JSON.stringify(root)}\n`,
      "root.yaml",
    );
    assert.deepEqual(
      errors.map((e) => `${e.path}: ${e.message}`),
      [`spec.trustedRoot: ${field} is missing: every key and CA in a trusted root must say from when it is valid`],
    );
  }
});

interface TrustedRootJson {
  tlogs: Array<{ publicKey: { validFor?: { start?: string } } }>;
  ctlogs: Array<{ publicKey: { validFor?: { start?: string } } }>;
  certificateAuthorities: Array<{ validFor?: { start?: string } }>;
  timestampAuthorities: Array<{ validFor?: { start?: string } }>;
}
