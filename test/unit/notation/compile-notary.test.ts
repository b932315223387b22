// A `notary` attestor entry compiled (src/core/image-policy/compile-notary.ts): the stores read as Notation reads a
// trust store, identities parsed, defaults, and every mistake a load error with its field path.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { compileNotaryEntry, readStoreCertificates, type RawNotaryEntry } from "../../../src/core/image-policy/compile-notary.ts";
import { codeSigningChain, createRoot, TIME_STAMPING } from "../../support/notation/test-pki.ts";

let pki: Awaited<ReturnType<typeof codeSigningChain>>;
let tsaRoot: Awaited<ReturnType<typeof createRoot>>;
before(async () => {
  pki = await codeSigningChain();
  tsaRoot = await createRoot({ subject: "C=US, ST=WA, O=Example, CN=Example TSA Root" });
});

function compile(raw: RawNotaryEntry, files: Record<string, string> = {}) {
  const errors: Array<{ path: Array<string | number>; message: string }> = [];
  const related = (name: string) => {
    if (!(name in files)) throw new Error("ENOENT: no such file");
    return files[name]!;
  };
  const entry = compileNotaryEntry(raw, ["spec", "rules", 0, "attestors", 0, "entries", 0, "notary"], "attestors[0].entries[0]", errors, related);
  return { entry, errors: errors.map((e) => `${e.path.join(".")}: ${e.message}`) };
}

describe("a notary entry", () => {
  test("with its certs inline: the root read, any identity, strict, timestamps always verified when there are tsaCerts", () => {
    const { entry, errors } = compile({ certs: pki.root.pem, tsaCerts: tsaRoot.pem });
    assert.deepEqual(errors, []);
    assert.equal(entry.type, "notary");
    assert.deepEqual("der" in entry.ca ? entry.ca.der.map((d) => Buffer.from(d).toString("base64")) : [], [Buffer.from(pki.root.der).toString("base64")]);
    assert.equal("der" in entry.tsa ? entry.tsa.der.length : -1, 1);
    assert.equal(entry.identities, "*");
    assert.equal(entry.level, "strict");
    assert.equal(entry.verifyTimestamp, "always");
    assert.equal(entry.revocation, "skip", "revocation is not checked unless asked");
    assert.equal(entry.label, "notary C=US, ST=WA, O=Example, CN=Example Root");
    assert.equal(compile({ certs: pki.root.pem, revocation: "enforce" }).entry.revocation, "enforce");
  });
  test("with identities, a level, a name, and files for its stores", () => {
    const { entry, errors } = compile(
      {
        certsRef: "roots.pem",
        signingAuthorityCertsRef: "authority.pem",
        trustedIdentities: ["x509.subject: C=US, ST=WA, O=Example", "x509.subject: C=US, ST=WA, O=Other, CN=Release"],
        level: "permissive",
        verifyTimestamp: "afterCertExpiry",
        name: "release signing",
      },
      { "roots.pem": pki.root.pem + pki.intermediate.pem, "authority.pem": tsaRoot.pem },
    );
    assert.deepEqual(errors, []);
    assert.equal("der" in entry.ca ? entry.ca.der.length : -1, 2, "both CA certificates of the file");
    assert.equal("der" in entry.signingAuthority ? entry.signingAuthority.der.length : -1, 1);
    assert.equal(Array.isArray(entry.identities) ? entry.identities.length : -1, 2);
    assert.equal(entry.level, "permissive");
    assert.equal(entry.verifyTimestamp, "afterCertExpiry");
    assert.equal(entry.label, "notary release signing");
  });
  test("with its stores in Secrets: named, read when a verification needs them (ca.crt unless the reference names a key)", () => {
    const { entry, errors } = compile({ certsRef: "k8s://security/roots", tsaCertsRef: "k8s://security/tsa/roots.pem", name: "release" });
    assert.deepEqual(errors, []);
    assert.deepEqual(entry.ca, { secretRef: { namespace: "security", secret: "roots", key: "ca.crt" } });
    assert.deepEqual(entry.tsa, { secretRef: { namespace: "security", secret: "tsa", key: "roots.pem" } });
    assert.deepEqual(entry.signingAuthority, { der: [] });
    assert.equal(entry.label, "notary release");
  });
  test("with a TrustRoot instead of its own stores: named, and its own stores empty; both at once is refused", () => {
    const { entry, errors } = compile({ trustRoot: "acme-notation" });
    assert.deepEqual(errors, []);
    assert.equal(entry.trustRoot, "acme-notation");
    assert.deepEqual([entry.ca, entry.signingAuthority, entry.tsa], [{ der: [] }, { der: [] }, { der: [] }]);
    assert.equal(entry.label, "notary trust root acme-notation");
    assert.deepEqual(compile({ trustRoot: "acme-notation", tsaCerts: tsaRoot.pem }).errors, [
      "spec.rules.0.attestors.0.entries.0.notary.tsaCerts: give trustRoot or tsaCerts, not both: the entry's certificates come from one place",
    ]);
  });
  for (const [what, raw, files, message] of [
    ["no certificates at all", { tsaCerts: "" }, {}, /give the certificates signatures must chain to/],
    ["both certs and certsRef", { certs: "x", certsRef: "y" }, {}, /certsRef: give certs or certsRef, not both/],
    ["a file that cannot be read", { certsRef: "missing.pem" }, {}, /certsRef: cannot read "missing\.pem": ENOENT/],
    ["text that holds no certificate", { certs: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----" }, {}, /certs: no PEM certificate/],
    ["a Secret reference of another form", { certsRef: "k8s://Security/roots" }, {}, /is not of the form k8s:\/\/NAMESPACE\/SECRET/],
    ["a malformed identity", { certs: "ROOT", trustedIdentities: ["x509.subject: C=US, ST=WA"] }, {}, /trustedIdentities\.0: .*O is required/],
    ["* among other identities", { certs: "ROOT", trustedIdentities: ["*", "x509.subject: C=US, ST=WA, O=A"] }, {}, /must be the only identity/],
    [
      "an identity a broader one already covers",
      { certs: "ROOT", trustedIdentities: ["x509.subject: C=US, ST=WA, O=A, OU=B", "x509.subject: C=US, ST=WA, O=A"] },
      {},
      /trustedIdentities\.0: every subject that matches it also matches trustedIdentities\[1\]/,
    ],
  ] as const)
    test(`refused: ${what}`, () => {
      const resolved = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, v === "ROOT" ? pki.root.pem : v])) as RawNotaryEntry;
      const { errors } = compile(resolved, files);
      assert.ok(
        errors.some((e) => message.test(e)),
        JSON.stringify(errors),
      );
    });
});

describe("a store's certificates", () => {
  test("a leaf that is neither a CA nor self-signed is not a trust anchor", () => {
    const read = readStoreCertificates(pki.leaf.pem, "trust");
    assert.ok("error" in read && /neither a CA nor self-signed/.test(read.error));
  });
  test("a tsa store holds self-signed roots only", async () => {
    const read = readStoreCertificates(pki.intermediate.pem, "tsa");
    assert.ok("error" in read && /not a self-signed root/.test(read.error));
    const tsaLeafRoot = await createRoot({ subject: "C=US, ST=WA, O=T, CN=TSA", isCa: false, extendedKeyUsage: { usages: [TIME_STAMPING], critical: true } });
    assert.ok("der" in readStoreCertificates(tsaLeafRoot.pem, "tsa"));
  });
});
