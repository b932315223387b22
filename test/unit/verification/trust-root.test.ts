// The TrustRoot kind and the embedded public-good root: what loads, and what is refused with file and field.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, test } from "node:test";
import { loadPolicies, parsePolicyText } from "../../../src/policy/load-policies.ts";
import { PolicyLoadError } from "../../../src/policy/policy-error.ts";
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

describe("attestor entries whose trust root is not loaded are refused when the set loads", () => {
  const keyless = (trustRoot?: string) =>
    `{keyless: {subject: "https://github.com/acme/*", issuer: "https://token.actions.githubusercontent.com"${trustRoot ? `, trustRoot: ${trustRoot}` : ""}}}`;
  const imagePolicy = (rule: string) =>
    `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: signed}\nspec:\n  rules:\n    - action: allow\n      images: ["*"]\n${rule}`;
  const trustRoot = (name: string) =>
    `apiVersion: imprimatur.dev/v1alpha1\nkind: TrustRoot\nmetadata: {name: ${name}}\nspec:\n  trustedRoot: ${JSON.stringify(embeddedTrustedRootJson())}\n`;
  const folder = async (files: Record<string, string>) => {
    const dir = await mkdtemp(join(tmpdir(), "imprimatur-trust-roots-"));
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    return dir;
  };
  /** The load errors, each as "file (document, field): message" with the file named within the folder. */
  const refusals = async (files: Record<string, string>) => {
    const dir = await folder(files);
    try {
      await loadPolicies(dir);
      return [];
    } catch (e) {
      assert.ok(e instanceof PolicyLoadError, String(e));
      return e.errors.map((err) => `${basename(err.origin)} (document ${err.document}, ${err.path}): ${err.message}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
  const missing = (name: string, loaded = "no TrustRoot is loaded") =>
    `ImagePolicy "signed": trust root ${JSON.stringify(name)} is not loaded (${loaded}; sigstore-public-good is embedded)`;

  test("a keyless entry naming a missing root: the policy, the entry's path and the root are named", async () => {
    assert.deepEqual(await refusals({ "p.yaml": imagePolicy(`      attestors: [{entries: [${keyless()}, ${keyless("corp")}]}]\n`) }), [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[1].keyless.trustRoot): ${missing("corp")}`,
    ]);
    assert.deepEqual(await refusals({ "p.yaml": imagePolicy(`      attestors: [{entries: [${keyless("corp")}]}]\n`), "other.yaml": trustRoot("other") }), [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp", "TrustRoots loaded: other")}`,
    ]);
    assert.deepEqual(
      await refusals({
        "p.yaml": imagePolicy(`      attestors: [{entries: [${keyless("corp")}]}]\n`),
        "a.yaml": trustRoot("dev"),
        "b.yaml": trustRoot("prod"),
      }),
      [`p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp", "TrustRoots loaded: dev, prod")}`],
    );
  });

  test("rules without attestors have no trust root to check", async () => {
    const rules = `      attestors: [{entries: [${keyless("corp")}]}]\n    - {action: deny, images: ["docker.io/*"]}\n`;
    assert.deepEqual(await refusals({ "p.yaml": imagePolicy(rules) }), [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp")}`,
    ]);
  });

  test("nested sets, an attestation's own attestors and key entries are checked too", async () => {
    const key = JSON.stringify(generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString());
    const rule = [
      `      attestors: [{entries: [{attestors: [{entries: [${keyless("nested")}]}]}, {staticKey: {key: ${key}, trustRoot: logged}}]}]`,
      `      attestations: [{predicateType: "https://slsa.dev/provenance/v1", attestors: [{entries: [${keyless("provenance")}]}]}]`,
      "",
    ].join("\n");
    assert.deepEqual(await refusals({ "p.yaml": imagePolicy(rule) }), [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].attestors[0].entries[0].keyless.trustRoot): ${missing("nested")}`,
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[1].staticKey.trustRoot): ${missing("logged")}`,
      `p.yaml (document 1, spec.rules[0].attestations[0].attestors[0].entries[0].keyless.trustRoot): ${missing("provenance")}`,
    ]);
  });

  test("the embedded public-good root (by default or by name) and a TrustRoot of the set resolve", async () => {
    const rule = `      attestors: [{entries: [${keyless()}, ${keyless("sigstore-public-good")}, ${keyless("corp")}]}]\n`;
    assert.deepEqual(await refusals({ "p.yaml": imagePolicy(rule), "corp.yaml": trustRoot("corp") }), []);
    const shared = `      attestors: [{entries: [${keyless("corp")}]}]\n      attestations: [{predicateType: "https://slsa.dev/provenance/v1"}]\n`;
    assert.deepEqual(await refusals({ "p.yaml": imagePolicy(shared) }), [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp")}`,
    ]);
  });
});
