// The TrustRoot kind and the embedded public-good root: what loads, what is refused with file and field, and what a
// rule whose trust root is missing does.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, test } from "node:test";
import { loadPolicies, parsePolicyText } from "../../../src/policy/load-policies.ts";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { verificationsNeeded } from "../../../src/core/image-policy/image-verification.ts";
import { withUnresolvedTrustRoots } from "../../../src/core/trust-root/trust-root-references.ts";
import { parseTrustedRoot } from "../../../src/core/trust-root/trust-root-kind.ts";
import { embeddedTrustedRootJson, publicGoodTrustRoot, trustRootNamed } from "../../../src/verification/trust-roots.ts";
import { codeSigningChain } from "../../support/notation/test-pki.ts";

test("the public-good root ships embedded: Fulcio CAs, Rekor and CT logs, usable offline", () => {
  const root = publicGoodTrustRoot();
  assert.equal(root.name, "sigstore-public-good");
  assert.ok(root.sigstore!.material.certificateAuthorities.length >= 1);
  assert.ok(root.sigstore!.material.tlogs.some((t) => t.baseURL === "https://rekor.sigstore.dev"));
  assert.equal(root.sigstore?.hasCtLogs, true);
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
    ["spec: {}", /^root\.yaml:4 spec: give trustedRoot .* notation \(Notary Project certificates\), or both/],
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

describe("attestor entries whose trust root is not loaded make their rules deny; the set loads", () => {
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
  /** The set as loaded from these files, with its warnings as "file (document, field): message". */
  const loaded = async (files: Record<string, string>) => {
    const dir = await folder(files);
    try {
      const set = await loadPolicies(dir);
      return { ...set, said: set.warnings.map((w) => `${basename(w.origin)} (document ${w.document}, ${w.path}): ${w.message}`) };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
  const missing = (name: string, loaded = "no TrustRoot is loaded", rule = 0) =>
    `ImagePolicy "signed": trust root ${JSON.stringify(name)} is not loaded (${loaded}; sigstore-public-good is embedded); rules[${rule}] denies every image it matches until it is`;

  test("a keyless entry naming a missing root: the policy, the entry's path and the root are named", async () => {
    const one = await loaded({ "p.yaml": imagePolicy(`      attestors: [{entries: [${keyless()}, ${keyless("corp")}]}]\n`) });
    assert.deepEqual(one.said, [`p.yaml (document 1, spec.rules[0].attestors[0].entries[1].keyless.trustRoot): ${missing("corp")}`]);
    assert.ok(one.warnings.every((w) => w.reason === "TrustRootNotFound"));
    const other = await loaded({ "p.yaml": imagePolicy(`      attestors: [{entries: [${keyless("corp")}]}]\n`), "other.yaml": trustRoot("other") });
    assert.deepEqual(other.said, [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp", "TrustRoots loaded: other")}`,
    ]);
    const two = await loaded({
      "p.yaml": imagePolicy(`      attestors: [{entries: [${keyless("corp")}]}]\n`),
      "a.yaml": trustRoot("dev"),
      "b.yaml": trustRoot("prod"),
    });
    assert.deepEqual(two.said, [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp", "TrustRoots loaded: dev, prod")}`,
    ]);
  });

  test("the rule that needs the root denies every image it matches, naming it; deny rules and the default keep enforcing", async () => {
    const rules = [
      `    - {action: deny, images: ["evil.example/*"], message: "never"}`,
      `    - action: allow`,
      `      images: ["registry.example.com/*"]`,
      `      attestors: [{entries: [${keyless("corp")}]}]`,
      `    - {action: allow, images: ["docker.io/library/*"]}`,
      `  default: deny`,
      "",
    ].join("\n");
    const { policies, said } = await loaded({
      "p.yaml": `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: signed}\nspec:\n  rules:\n${rules}`,
    });
    assert.deepEqual(said, [`p.yaml (document 1, spec.rules[1].attestors[0].entries[0].keyless.trustRoot): ${missing("corp", undefined, 1)}`]);
    const review = (image: string) =>
      evaluateImagePolicies(policies.ImagePolicy, { namespace: "default", annotations: {}, images: [{ image, field: "spec.containers[0].image" }] }, {});
    const messages = (image: string) => review(image).violations.map((v) => `${v.rule}: ${v.message}`);
    const signed = `registry.example.com/app@sha256:${"a".repeat(64)}`;
    assert.deepEqual(messages(signed), [
      'rules[1]: trust root "corp" is not loaded (no TrustRoot is loaded; sigstore-public-good is embedded): this rule cannot verify signatures, so it denies every image it matches',
    ]);
    assert.equal(review(signed).allowed, false);
    // Before digestVerify: a digest would not get the image past this rule, so the missing root is the reason.
    assert.match(messages("registry.example.com/app:1")[0]!, /^rules\[1\]: trust root "corp" is not loaded/);
    assert.deepEqual(messages("evil.example/x:1"), ["rules[0]: never"]);
    assert.deepEqual(messages("quay.io/other:1"), ["default: no rule of this policy allows this image"]);
    assert.equal(review("docker.io/library/busybox:1").allowed, true);
    // Online, the verifier is not asked about it: there is nothing it could verify.
    assert.deepEqual(verificationsNeeded(policies.ImagePolicy, "default", [{ image: signed, field: "spec.containers[0].image", pod: 0 }], {}), []);
  });

  test("rules without attestors have no trust root to check", async () => {
    const rules = `      attestors: [{entries: [${keyless("corp")}]}]\n    - {action: deny, images: ["docker.io/*"]}\n`;
    const { said, policies } = await loaded({ "p.yaml": imagePolicy(rules) });
    assert.deepEqual(said, [`p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp")}`]);
    assert.deepEqual(
      policies.ImagePolicy[0]!.rules.map((r) => r.unverifiable !== undefined),
      [true, false],
    );
  });

  test("nested sets, an attestation's own attestors and key entries are checked too; one reason names every missing root", async () => {
    const key = JSON.stringify(generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString());
    const rule = [
      `      attestors: [{entries: [{attestors: [{entries: [${keyless("nested")}]}]}, {staticKey: {key: ${key}, trustRoot: logged}}]}]`,
      `      attestations: [{predicateType: "https://slsa.dev/provenance/v1", attestors: [{entries: [${keyless("provenance")}, ${keyless("nested")}]}]}]`,
      "",
    ].join("\n");
    const { said, policies } = await loaded({ "p.yaml": imagePolicy(rule) });
    assert.deepEqual(said, [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].attestors[0].entries[0].keyless.trustRoot): ${missing("nested")}`,
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[1].staticKey.trustRoot): ${missing("logged")}`,
      `p.yaml (document 1, spec.rules[0].attestations[0].attestors[0].entries[0].keyless.trustRoot): ${missing("provenance")}`,
      `p.yaml (document 1, spec.rules[0].attestations[0].attestors[0].entries[1].keyless.trustRoot): ${missing("nested")}`,
    ]);
    assert.match(policies.ImagePolicy[0]!.rules[0]!.unverifiable ?? "", /^trust roots "nested", "logged", "provenance" are not loaded \(/);
  });

  test("the embedded public-good root (by default or by name) and a TrustRoot of the set resolve", async () => {
    const rule = `      attestors: [{entries: [${keyless()}, ${keyless("sigstore-public-good")}, ${keyless("corp")}]}]\n`;
    const resolved = await loaded({ "p.yaml": imagePolicy(rule), "corp.yaml": trustRoot("corp") });
    assert.deepEqual(resolved.said, []);
    assert.equal(resolved.policies.ImagePolicy[0]!.rules[0]!.unverifiable, undefined);
    const shared = `      attestors: [{entries: [${keyless("corp")}]}]\n      attestations: [{predicateType: "https://slsa.dev/provenance/v1"}]\n`;
    assert.deepEqual((await loaded({ "p.yaml": imagePolicy(shared) })).said, [
      `p.yaml (document 1, spec.rules[0].attestors[0].entries[0].keyless.trustRoot): ${missing("corp")}`,
    ]);
  });
});

test("marking rules that need a missing root leaves the compiled policies as they were, and the others the same objects", () => {
  const { policies } = parsePolicyText(
    [
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: needs}\nspec:\n  rules:",
      '    - {action: allow, images: ["a.example/*"], attestors: [{entries: [{keyless: {subject: "*", issuer: "*", trustRoot: corp}}]}]}',
      '    - {action: deny, images: ["b.example/*"]}',
      "---",
      'apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: plain}\nspec:\n  rules: [{action: deny, images: ["c.example/*"]}]',
      "",
    ].join("\n"),
    "p.yaml",
  );
  const [needs, plain] = policies.ImagePolicy;
  const marked = withUnresolvedTrustRoots(policies.ImagePolicy, []);
  assert.deepEqual(
    marked.unresolved.map((u) => [u.policy, u.rule, u.trustRoot, u.path]),
    [["needs", 0, "corp", "spec.rules[0].attestors[0].entries[0].keyless.trustRoot"]],
  );
  assert.equal(needs!.rules[0]!.unverifiable, undefined, "the compiled policy is not changed");
  assert.notEqual(marked.policies[0], needs);
  assert.equal(marked.policies[0]!.rules[1], needs!.rules[1], "a rule that needs no root is the same object");
  assert.equal(marked.policies[1], plain, "a policy that needs no root is the same object");
  const withCorp = withUnresolvedTrustRoots(policies.ImagePolicy, [{ name: "corp", sigstore: publicGoodTrustRoot().sigstore! }]);
  assert.deepEqual(withCorp, { policies: [needs, plain], unresolved: [] });
});

test("a TrustRoot's parts answer only the entries that need them: notary entries its Notation stores, key and keyless entries its Sigstore root", async () => {
  const pki = await codeSigningChain();
  const notationOnly = { name: "acme-notation", notation: { ca: [pki.root.der], signingAuthority: [], tsa: [] } };
  const sigstoreOnly = { name: "corp", sigstore: publicGoodTrustRoot().sigstore! };
  const { policies } = parsePolicyText(
    [
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: p}\nspec:\n  rules:",
      '    - {action: allow, images: ["a.example/*"], attestors: [{entries: [{notary: {trustRoot: acme-notation}}]}]}',
      '    - {action: allow, images: ["b.example/*"], attestors: [{entries: [{notary: {trustRoot: corp}}]}]}',
      '    - {action: allow, images: ["c.example/*"], attestors: [{entries: [{keyless: {subject: "*", issuer: "*", trustRoot: acme-notation}}]}]}',
      '    - {action: allow, images: ["d.example/*"], attestors: [{entries: [{notary: {trustRoot: gone}}]}]}',
      '    - {action: allow, images: ["e.example/*"], attestors: [{entries: [{notary: {certs: "PEM"}}]}]}',
      "",
    ]
      .join("\n")
      .replace('"PEM"', JSON.stringify(pki.root.pem)),
    "p.yaml",
  );
  const marked = withUnresolvedTrustRoots(policies.ImagePolicy, [notationOnly, sigstoreOnly]);
  const rules = marked.policies[0]!.rules;
  assert.equal(rules[0]!.unverifiable, undefined);
  assert.match(rules[1]!.unverifiable ?? "", /^trust root "corp" holds no Notation certificates \(spec\.notation\) \(TrustRoots loaded: acme-notation, corp;/);
  assert.match(rules[2]!.unverifiable ?? "", /^trust root "acme-notation" holds no Sigstore trusted root \(spec\.trustedRoot or spec\.path\)/);
  assert.match(rules[3]!.unverifiable ?? "", /^trust root "gone" is not loaded/);
  assert.equal(rules[4]!.unverifiable, undefined, "a notary entry with its own certificates needs no TrustRoot");
  assert.deepEqual(
    marked.unresolved.map((u) => u.path),
    [
      "spec.rules[1].attestors[0].entries[0].notary.trustRoot",
      "spec.rules[2].attestors[0].entries[0].keyless.trustRoot",
      "spec.rules[3].attestors[0].entries[0].notary.trustRoot",
    ],
  );
});
