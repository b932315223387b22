// Compiling an ImagePolicy rule's attestors (src/core/image-policy/compile-attestors.ts): the keys it accepts and
// why it refuses others, keyless identities and what they match, certificate extensions by name or OID, Secret
// references, labels and defaults, and the load errors with their field paths.
import assert from "node:assert/strict";
import { createHash, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { test } from "node:test";
import type { AttestorEntry } from "../../src/core/image-policy/attestors.ts";
import { FULCIO_EXTENSIONS, parsePublicKey } from "../../src/core/image-policy/compile-attestors.ts";
import { imagePolicyKind } from "../../src/core/image-policy/image-policy-kind.ts";

/** A fresh public key of this type as PEM. */
const pem = (type: string, options: Record<string, unknown> = {}): string =>
  (generateKeyPairSync as unknown as (t: string, o: Record<string, unknown>) => { publicKey: KeyObject })(type, options)
    .publicKey.export({ type: "spki", format: "pem" })
    .toString();

/** Compiles one allow rule with these attestor sets; `related` reads key files. */
function compile(attestors: unknown[], related?: (path: string) => string) {
  return imagePolicyKind.compile(
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "p" },
      spec: { rules: [{ action: "allow", images: ["registry.example.com/*"], attestors }] },
    },
    { source: { origin: "p.yaml" }, ...(related ? { related } : {}) },
  );
}
/** The compiled entries of every set, in order (the test gives as many as it reads). */
const entries = (attestors: unknown[], related?: (path: string) => string): AttestorEntry[] & Record<0 | 1 | 2, AttestorEntry> => {
  const compiled = compile(attestors, related);
  assert.deepEqual(compiled.issues, []);
  return compiled.policy!.rules[0]!.attestors!.flatMap((s) => s.entries) as AttestorEntry[] & Record<0 | 1 | 2, AttestorEntry>;
};
const issues = (attestors: unknown[], related?: (path: string) => string) => compile(attestors, related).issues.map((i) => `${i.path.join(".")}: ${i.message}`);
const ISSUER = "https://token.actions.githubusercontent.com";

test("ECDSA P-256, P-384 and P-521, RSA and Ed25519 keys are accepted, with the fingerprint of their SPKI", () => {
  for (const [type, options] of [
    ["ec", { namedCurve: "P-256" }],
    ["ec", { namedCurve: "P-384" }],
    ["ec", { namedCurve: "P-521" }],
    ["rsa", { modulusLength: 2048 }],
    ["ed25519", {}],
  ] as const) {
    const text = pem(type, options);
    const parsed = parsePublicKey(text);
    assert.ok("key" in parsed, `${type} ${JSON.stringify(options)}: ${"error" in parsed ? parsed.error : ""}`);
    const der = createPublicKey(text).export({ type: "spki", format: "der" });
    assert.equal(parsed.key.fingerprint, `sha256:${createHash("sha256").update(der).digest("hex")}`);
    assert.equal(parsed.key.pem, text);
  }
});

test("other keys and texts that are no public key are refused, saying which keys are supported", () => {
  const refused = (text: string) => {
    const parsed = parsePublicKey(text);
    assert.ok("error" in parsed);
    return parsed.error;
  };
  assert.equal(refused(pem("ec", { namedCurve: "secp256k1" })), "ECDSA curve secp256k1 is not supported; use P-256, P-384 or P-521");
  assert.equal(refused(pem("x25519")), "x25519 keys are not supported; use ECDSA (P-256/384/521), RSA or Ed25519");
  assert.equal(refused(pem("ed448")), "ed448 keys are not supported; use ECDSA (P-256/384/521), RSA or Ed25519");
  assert.equal(refused("not a key"), "not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)");
  // A PEM public key that does not decode: OpenSSL's reason, without its "error:<code>:" prefix.
  assert.equal(refused("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), "not a usable PEM public key: asn1 encoding routines::wrong tag");
});

test("static keys: inline or from a file next to the policy, labelled by name, file or fingerprint; ignoreTlog defaults to false", () => {
  const key = pem("ec", { namedCurve: "P-256" });
  const read: string[] = [];
  const [named, byFile, anonymous] = entries(
    [
      {
        count: 1,
        entries: [
          { staticKey: { name: "release", key, ignoreTlog: true } },
          { staticKey: { keyRef: "keys/release.pub", trustRoot: "private" } },
          { staticKey: { key } },
        ],
      },
    ],
    (path) => (read.push(path), key),
  );
  assert.deepEqual(read, ["keys/release.pub"]);
  const fingerprint = (parsePublicKey(key) as { key: { fingerprint: string } }).key.fingerprint;
  assert.deepEqual(named, {
    type: "staticKey",
    path: "attestors[0].entries[0]",
    label: "key release",
    key: { pem: key, fingerprint },
    ignoreTlog: true,
    trustRoot: "sigstore-public-good",
  });
  assert.deepEqual(byFile, {
    type: "staticKey",
    path: "attestors[0].entries[1]",
    label: "key keys/release.pub",
    key: { pem: key, fingerprint },
    ignoreTlog: false,
    trustRoot: "private",
  });
  assert.equal(anonymous.label, `key ${fingerprint.slice(0, 19)}`);
  assert.equal(anonymous.type === "staticKey" && anonymous.ignoreTlog, false);
});

test("static keys in Kubernetes Secrets: namespace, name and key (cosign.pub by default)", () => {
  const [dflt, own, named] = entries([
    {
      entries: [
        { staticKey: { keyRef: "k8s://signing/release-key" } },
        { staticKey: { keyRef: "k8s://signing/release-key/other.pub", ignoreTlog: true } },
        { staticKey: { keyRef: "k8s://signing/release.key-2", name: "release", trustRoot: "private" } },
      ],
    },
  ]);
  assert.deepEqual(dflt, {
    type: "staticKey",
    path: "attestors[0].entries[0]",
    label: "key k8s://signing/release-key",
    key: { secretRef: { namespace: "signing", secret: "release-key", key: "cosign.pub" } },
    ignoreTlog: false,
    trustRoot: "sigstore-public-good",
  });
  assert.deepEqual(own.type === "staticKey" && [own.key, own.ignoreTlog], [
    { secretRef: { namespace: "signing", secret: "release-key", key: "other.pub" } },
    true,
  ]);
  assert.deepEqual(named.type === "staticKey" && [named.label, named.trustRoot], ["key release", "private"]);
  for (const bad of [
    "k8s://Signing/key",
    "k8s://signing/",
    "k8s://signing/key/",
    "k8s://signing/key/a/b",
    "k8s://-x/key",
    "k8s://signing/key-",
    // A second "k8s://" further on: no reference either, though its tail alone would be one.
    "k8s://a_b/k8s://signing/key",
  ])
    assert.deepEqual(issues([{ entries: [{ staticKey: { keyRef: bad } }] }]), [
      `spec.rules.0.attestors.0.entries.0.staticKey.keyRef: ${JSON.stringify(bad)} is not of the form k8s://NAMESPACE/SECRET[/KEY]`,
    ]);
});

test("static key mistakes: both or neither of key and keyRef, files without a policy folder, unreadable or unusable files", () => {
  const key = pem("ec", { namedCurve: "P-256" });
  assert.deepEqual(issues([{ entries: [{ staticKey: { key, keyRef: "k" } }, { staticKey: {} }] }]), [
    "spec.rules.0.attestors.0.entries.0.staticKey: give exactly one of key (a PEM public key) and keyRef (a file or k8s://NAMESPACE/SECRET[/KEY])",
    "spec.rules.0.attestors.0.entries.1.staticKey: give exactly one of key (a PEM public key) and keyRef (a file or k8s://NAMESPACE/SECRET[/KEY])",
  ]);
  assert.deepEqual(issues([{ entries: [{ staticKey: { keyRef: "release.pub" } }] }]), [
    "spec.rules.0.attestors.0.entries.0.staticKey.keyRef: key files can only be named by policies loaded from files",
  ]);
  assert.deepEqual(
    issues([{ entries: [{ staticKey: { keyRef: "missing.pub" } }] }], () => {
      throw new Error("ENOENT: no such file");
    }),
    ['spec.rules.0.attestors.0.entries.0.staticKey.keyRef: cannot read "missing.pub": ENOENT: no such file'],
  );
  assert.deepEqual(
    issues([{ entries: [{ staticKey: { keyRef: "garbage.pub" } }] }], () => "garbage"),
    ["spec.rules.0.attestors.0.entries.0.staticKey.keyRef: not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)"],
  );
});

test("an entry that failed to load names no signer: two unusable keys or malformed Secret references in one set are their own errors only", () => {
  assert.deepEqual(issues([{ entries: [{ staticKey: { key: "not a key" } }, { staticKey: { key: "nor this" } }] }]), [
    "spec.rules.0.attestors.0.entries.0.staticKey.key: not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)",
    "spec.rules.0.attestors.0.entries.1.staticKey.key: not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)",
  ]);
  assert.deepEqual(issues([{ entries: [{ staticKey: { keyRef: "k8s://Bad/" } }, { staticKey: { keyRef: "k8s://-x/key" } }] }]), [
    'spec.rules.0.attestors.0.entries.0.staticKey.keyRef: "k8s://Bad/" is not of the form k8s://NAMESPACE/SECRET[/KEY]',
    'spec.rules.0.attestors.0.entries.1.staticKey.keyRef: "k8s://-x/key" is not of the form k8s://NAMESPACE/SECRET[/KEY]',
  ]);
});

test("keyless identities: exact, with * matching anything (line breaks too), or a regular expression", () => {
  const [exact, glob, regExp] = entries([
    {
      entries: [
        { keyless: { subject: "ops@acme.example", issuer: ISSUER, ignoreTlog: true, trustRoot: "private" } },
        { keyless: { subject: "https://github.com/acme/*/release.yml@*", issuerRegExp: "^https://token\\.actions\\." } },
        { keyless: { subjectRegExp: "^ops@(acme|example)\\.com$", issuer: ISSUER } },
      ],
    },
  ]);
  assert.ok(exact.type === "keyless" && glob.type === "keyless" && regExp.type === "keyless");
  assert.deepEqual(
    [exact.label, exact.subject.source, exact.subject.exact, exact.ignoreTlog, exact.trustRoot],
    ["keyless ops@acme.example", "ops@acme.example", "ops@acme.example", true, "private"],
  );
  assert.equal(exact.subject.test("ops@acme.example"), true);
  for (const other of ["ops@acme.examples", "xops@acme.example", "ops@acme-example"]) assert.equal(exact.subject.test(other), false, other);
  assert.equal(exact.issuer.test(ISSUER), true);
  assert.deepEqual(
    [glob.label, glob.subject.exact, glob.ignoreTlog, glob.trustRoot],
    ["keyless https://github.com/acme/*/release.yml@*", undefined, false, "sigstore-public-good"],
  );
  assert.equal(glob.subject.test("https://github.com/acme/app/release.yml@refs/tags/v1"), true);
  assert.equal(glob.subject.test("https://github.com/acme/a\nb/release.yml@x"), true);
  // Dots are literal; the whole subject must match.
  for (const other of [
    "https://github.com/acme/app/releaseXyml@v1",
    "https://github.com/evil/app/release.yml@v1",
    "xhttps://github.com/acme/app/release.yml@v1",
  ])
    assert.equal(glob.subject.test(other), false, other);
  assert.equal(glob.issuer.source, "/^https://token\\.actions\\./");
  assert.equal(glob.issuer.test(ISSUER), true);
  assert.equal(glob.issuer.test("https://token-actions.example"), false);
  assert.equal(regExp.label, "keyless /^ops@(acme|example)\\.com$/");
  assert.equal(regExp.subject.test("ops@example.com"), true);
  assert.equal(regExp.subject.test("ops@evil.com"), false);
});

test("keyless mistakes name the field", () => {
  assert.deepEqual(
    issues([
      {
        entries: [
          { keyless: { issuer: ISSUER } },
          { keyless: { subject: "a", issuer: ISSUER, issuerRegExp: "x" } },
          { keyless: { subject: "a" } },
          // Valid in JavaScript, refused by RE2: patterns are RE2 syntax, as Go's regexp reads them.
          { keyless: { subjectRegExp: "(?<=@)acme\\.example$", issuer: ISSUER } },
          { keyless: { subject: "a", issuerRegExp: "^(https)://\\1" } },
        ],
      },
    ]),
    [
      "spec.rules.0.attestors.0.entries.0.keyless: give exactly one of subject and subjectRegExp",
      "spec.rules.0.attestors.0.entries.1.keyless: give exactly one of issuer and issuerRegExp",
      "spec.rules.0.attestors.0.entries.2.keyless: give exactly one of issuer and issuerRegExp",
      "spec.rules.0.attestors.0.entries.3.keyless.subjectRegExp: invalid regular expression (RE2 syntax): invalid named capture: `(?<=@)acme\\.example$`: RE2 has no look-around",
      "spec.rules.0.attestors.0.entries.4.keyless.issuerRegExp: invalid regular expression (RE2 syntax): invalid escape sequence: `\\1`: RE2 has no backreferences",
    ],
  );
});

test("certificate extensions by Fulcio's names or as dotted OIDs", () => {
  assert.deepEqual(FULCIO_EXTENSIONS, {
    githubWorkflowTrigger: "1.3.6.1.4.1.57264.1.2",
    githubWorkflowSha: "1.3.6.1.4.1.57264.1.3",
    githubWorkflowName: "1.3.6.1.4.1.57264.1.4",
    githubWorkflowRepository: "1.3.6.1.4.1.57264.1.5",
    githubWorkflowRef: "1.3.6.1.4.1.57264.1.6",
    buildSignerURI: "1.3.6.1.4.1.57264.1.9",
    buildSignerDigest: "1.3.6.1.4.1.57264.1.10",
    runnerEnvironment: "1.3.6.1.4.1.57264.1.11",
    sourceRepositoryURI: "1.3.6.1.4.1.57264.1.12",
    sourceRepositoryDigest: "1.3.6.1.4.1.57264.1.13",
    sourceRepositoryRef: "1.3.6.1.4.1.57264.1.14",
    sourceRepositoryIdentifier: "1.3.6.1.4.1.57264.1.15",
    sourceRepositoryOwnerURI: "1.3.6.1.4.1.57264.1.16",
    sourceRepositoryOwnerIdentifier: "1.3.6.1.4.1.57264.1.17",
    buildConfigURI: "1.3.6.1.4.1.57264.1.18",
    buildConfigDigest: "1.3.6.1.4.1.57264.1.19",
    buildTrigger: "1.3.6.1.4.1.57264.1.20",
    runInvocationURI: "1.3.6.1.4.1.57264.1.21",
    sourceRepositoryVisibilityAtSigning: "1.3.6.1.4.1.57264.1.22",
  });
  const names = Object.fromEntries(Object.keys(FULCIO_EXTENSIONS).map((n) => [n, `value of ${n}`]));
  const [entry] = entries([{ entries: [{ keyless: { subject: "a", issuer: ISSUER, additionalExtensions: { ...names, "1.2.840.1": "x", "12.34": "y" } } }] }]);
  assert.ok(entry.type === "keyless");
  assert.deepEqual(entry.extensions, [
    ...Object.entries(FULCIO_EXTENSIONS).map(([name, oid]) => ({ name, oid, value: `value of ${name}` })),
    { name: "1.2.840.1", oid: "1.2.840.1", value: "x" },
    { name: "12.34", oid: "12.34", value: "y" },
  ]);
  for (const bad of ["1", "1.", ".1", "1..2", "x1.2", "1.2x", "1.x2", "a.b"])
    assert.deepEqual(issues([{ entries: [{ keyless: { subject: "a", issuer: ISSUER, additionalExtensions: { [bad]: "v" } } }] }]), [
      `spec.rules.0.attestors.0.entries.0.keyless.additionalExtensions.${bad}: unknown certificate extension ${JSON.stringify(bad)}; use one of ${Object.keys(FULCIO_EXTENSIONS).join(", ")}, or a dotted OID`,
    ]);
});

test("entries fixed to one signer count once: the same exact identity twice cannot meet count 2; identities that only share a subject can", () => {
  const twice = { subject: "ops@acme.example", issuer: ISSUER };
  assert.deepEqual(issues([{ count: 2, entries: [{ keyless: twice }, { keyless: twice }] }]), [
    `spec.rules.0.attestors.0.entries.1: names the same signer as entries[0] (subject ops@acme.example issuer ${ISSUER}); this set needs 2 distinct signers and its entries allow at most 1`,
  ]);
  assert.deepEqual(
    issues([
      {
        count: 2,
        entries: [
          { keyless: { subject: "ops@acme.example", issuerRegExp: "^https://a" } },
          { keyless: { subject: "ops@acme.example", issuerRegExp: "^https://b" } },
        ],
      },
      { count: 2, entries: [{ keyless: { subjectRegExp: "^ops@", issuer: ISSUER } }, { keyless: { subjectRegExp: "^ops@", issuer: ISSUER } }] },
    ]),
    [],
  );
});

test("nested sets: compiled with their own paths, and their mistakes named there", () => {
  const [nested] = entries([
    {
      entries: [
        { attestors: [{ entries: [{ keyless: { subject: "a", issuer: ISSUER } }] }, { count: 1, entries: [{ keyless: { subject: "b", issuer: ISSUER } }] }] },
      ],
    },
  ]);
  assert.ok(nested.type === "nested");
  assert.equal(nested.label, "nested set attestors[0].entries[0]");
  assert.deepEqual(
    nested.sets.map((s) => [s.path, s.required, s.entries.map((e) => e.path)]),
    [
      ["attestors[0].entries[0].attestors[0]", 1, ["attestors[0].entries[0].attestors[0].entries[0]"]],
      ["attestors[0].entries[0].attestors[1]", 1, ["attestors[0].entries[0].attestors[1].entries[0]"]],
    ],
  );
  assert.deepEqual(
    issues([
      { entries: [{ attestors: [{ entries: [{ keyless: { subject: "x", issuer: ISSUER } }] }, { count: 2, entries: [{ keyless: { subject: "a" } }] }] }] },
    ]),
    [
      "spec.rules.0.attestors.0.entries.0.attestors.1.entries.0.keyless: give exactly one of issuer and issuerRegExp",
      "spec.rules.0.attestors.0.entries.0.attestors.1.count: count 2 is more than the 1 entries of this set",
    ],
  );
});
