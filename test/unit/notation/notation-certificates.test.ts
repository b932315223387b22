// The Notary Project certificate rules (src/notation/notation-certificates.ts): the chain's shape, each certificate's
// profile, the trust store, validity and trusted identities, each rule broken on its own by the test PKI.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import {
  checkChainProfile,
  checkTrusted,
  checkValidity,
  describeSubject,
  identityMatches,
  readChain,
  type CertificatePurpose,
} from "../../../src/notation/notation-certificates.ts";
import { formatTrustedIdentity, parseTrustedIdentity as parseIdentity } from "../../../src/core/image-policy/notary-identities.ts";
import { codeSigningChain, createRoot, issue, SERVER_AUTH, TIME_STAMPING, CODE_SIGNING, type TestCertificate } from "../../support/notation/test-pki.ts";

const KU = x509.KeyUsageFlags;
let pki: Awaited<ReturnType<typeof codeSigningChain>>;
before(async () => {
  pki = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme\\, Inc., OU=Builds, CN=Builder");
});

function profileRefused(chain: TestCertificate[], code: string, message: RegExp, purpose: CertificatePurpose = "codeSigning"): void {
  assert.throws(
    () => checkChainProfile(readChain(chain.map((c) => c.der)), purpose),
    (e: unknown) => hasErrorCode(e, code) && message.test((e as Error).message),
  );
}

describe("the chain's shape and profile", () => {
  test("root, intermediate and code-signing leaf pass", () => checkChainProfile(readChain(pki.chain), "codeSigning"));
  test("an RSA root and intermediate pass", async () => {
    const root = await createRoot({ subject: "C=US, ST=WA, O=R, CN=RSA Root", keyType: "rsa-3072" });
    const leaf = await issue(root, { subject: "C=US, ST=WA, O=R, CN=Leaf", keyType: "rsa-2048" });
    checkChainProfile(readChain([leaf.der, root.der]), "codeSigning");
  });
  test("a self-signed leaf alone passes when it fits the leaf's profile", async () => {
    const self = await createRoot({ subject: "C=US, ST=WA, O=S, CN=Self", isCa: false });
    checkChainProfile(readChain([self.der]), "codeSigning");
  });
  test("out of order", () => profileRefused([pki.leaf, pki.root, pki.intermediate], "chain", /not issued by certificate 1/));
  test("without its root", () => profileRefused([pki.leaf, pki.intermediate], "chain", /self-signed root/));
  test("with an unrelated certificate after the root", async () => {
    const other = await createRoot({ subject: "C=US, ST=WA, O=O, CN=Other Root" });
    profileRefused([pki.leaf, pki.intermediate, pki.root, other], "chain", /self-signed but is not the last/);
  });
  test("an intermediate without basicConstraints CA:true", async () => {
    const notCa = await issue(pki.root, {
      subject: "C=US, ST=WA, O=X, CN=Not a CA",
      keyUsage: { flags: KU.keyCertSign, critical: true },
      basicConstraints: { ca: false },
    });
    const leaf = await issue(notCa, { subject: "C=US, ST=WA, O=X, CN=Leaf" });
    profileRefused([leaf, notCa, pki.root], "profile", /basicConstraints CA:true/);
  });
  test("a path length the chain exceeds", async () => {
    const capped = await issue(pki.root, { subject: "C=US, ST=WA, O=X, CN=Capped", isCa: true, basicConstraints: { ca: true, pathLength: 0 } });
    const below = await issue(capped, { subject: "C=US, ST=WA, O=X, CN=Below", isCa: true });
    const leaf = await issue(below, { subject: "C=US, ST=WA, O=X, CN=Leaf" });
    profileRefused([leaf, below, capped, pki.root], "profile", /allows 0 CAs below it/);
  });
  test("a CA without keyCertSign", async () => {
    const ca = await issue(pki.root, { subject: "C=US, ST=WA, O=X, CN=No Sign", isCa: true, keyUsage: { flags: KU.cRLSign, critical: true } });
    const leaf = await issue(ca, { subject: "C=US, ST=WA, O=X, CN=Leaf" });
    profileRefused([leaf, ca, pki.root], "profile", /keyCertSign/);
  });
  const leafCases: Array<[string, Parameters<typeof issue>[1], RegExp]> = [
    ["a leaf that is a CA", { subject: "C=US, ST=WA, O=X, CN=L", basicConstraints: { ca: true } }, /is a CA/],
    ["a leaf without keyUsage", { subject: "C=US, ST=WA, O=X, CN=L", keyUsage: "absent" }, /no keyUsage/],
    [
      "a leaf whose keyUsage is not critical",
      { subject: "C=US, ST=WA, O=X, CN=L", keyUsage: { flags: KU.digitalSignature, critical: false } },
      /not marked critical/,
    ],
    [
      "a leaf without digitalSignature",
      { subject: "C=US, ST=WA, O=X, CN=L", keyUsage: { flags: KU.nonRepudiation, critical: true } },
      /lacks digitalSignature/,
    ],
    [
      "a leaf that may also encipher keys",
      { subject: "C=US, ST=WA, O=X, CN=L", keyUsage: { flags: KU.digitalSignature | KU.keyEncipherment, critical: true } },
      /more than signing/,
    ],
    ["a leaf for TLS servers", { subject: "C=US, ST=WA, O=X, CN=L", extendedKeyUsage: { usages: [CODE_SIGNING, SERVER_AUTH] } }, /1\.3\.6\.1\.5\.5\.7\.3\.1/],
    ["a leaf for any purpose", { subject: "C=US, ST=WA, O=X, CN=L", extendedKeyUsage: { usages: ["2.5.29.37.0"] } }, /2\.5\.29\.37\.0/],
    ["a leaf of 1024-bit RSA", { subject: "C=US, ST=WA, O=X, CN=L", keyType: "rsa-1024" }, /1024 bits/],
  ];
  for (const [what, opts, message] of leafCases)
    test(what, async () => {
      const leaf = await issue(pki.intermediate, opts);
      profileRefused([leaf, pki.intermediate, pki.root], "profile", message);
    });
  test("a leaf without extendedKeyUsage passes (it is optional for code signing)", async () => {
    const leaf = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=L", extendedKeyUsage: "absent" });
    checkChainProfile(readChain([leaf.der, pki.intermediate.der, pki.root.der]), "codeSigning");
  });
  test("a time-stamping leaf needs id-kp-timeStamping alone, critical", async () => {
    const good = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=TSA", extendedKeyUsage: { usages: [TIME_STAMPING], critical: true } });
    checkChainProfile(readChain([good.der, pki.intermediate.der, pki.root.der]), "timeStamping");
    const notCritical = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=TSA", extendedKeyUsage: { usages: [TIME_STAMPING], critical: false } });
    profileRefused([notCritical, pki.intermediate, pki.root], "profile", /timeStamping alone/, "timeStamping");
    profileRefused([good, pki.intermediate, pki.root], "profile", /1\.3\.6\.1\.5\.5\.7\.3\.8/, "codeSigning");
  });
});

describe("the trust store", () => {
  test("the chain's root in the store is trusted", () => checkTrusted(readChain(pki.chain), [pki.root.der], "trust store ca:acme"));
  test("an intermediate in the store is trusted too (a certificate of the chain, byte for byte)", () =>
    checkTrusted(readChain(pki.chain), [pki.intermediate.der], "trust store ca:acme"));
  test("another root is not", async () => {
    const other = await createRoot({ subject: "C=US, ST=WA, O=O, CN=Other Root" });
    assert.throws(
      () => checkTrusted(readChain(pki.chain), [other.der], "trust store ca:acme"),
      (e: unknown) => hasErrorCode(e, "untrusted") && /ca:acme/.test((e as Error).message),
    );
  });
});

describe("validity", () => {
  test("every certificate valid now", () => checkValidity(readChain(pki.chain), new Date(), new Date(), "now"));
  test("an expired leaf is not valid now, but was while it was", async () => {
    const day = 86_400_000;
    const expired = await issue(pki.intermediate, {
      subject: "C=US, ST=WA, O=X, CN=Old",
      notBefore: new Date(Date.now() - 10 * day),
      notAfter: new Date(Date.now() - day),
    });
    const chain = readChain([expired.der, pki.intermediate.der, pki.root.der]);
    assert.throws(
      () => checkValidity(chain, new Date(), new Date(), "now"),
      (e: unknown) => hasErrorCode(e, "validity") && /certificate 0/.test((e as Error).message),
    );
    const then = new Date(Date.now() - 2 * day);
    assert.throws(
      () => checkValidity(chain, then, then, "then"),
      (e: unknown) => hasErrorCode(e, "validity") && /certificate 1/.test((e as Error).message),
      "the intermediate was not yet valid then",
    );
  });
  test("a time range must lie inside every certificate's validity", () => {
    const chain = readChain(pki.chain);
    const notAfter = new Date(chain.node[0]!.validTo);
    assert.throws(
      () => checkValidity(chain, new Date(), new Date(notAfter.getTime() + 1000), "the timestamp's range"),
      (e: unknown) => hasErrorCode(e, "validity"),
    );
  });
});

function parseTrustedIdentity(text: string) {
  const parsed = parseIdentity(text);
  if ("error" in parsed) throw new Error(parsed.error);
  return parsed.identity;
}

describe("trusted identities", () => {
  test("the leaf's subject matches an identity of some of its attributes, in any order", () => {
    const leaf = readChain(pki.chain).parsed[0]!;
    assert.equal(identityMatches(parseTrustedIdentity("x509.subject: O=Acme\\, Inc., ST=WA, C=US"), leaf), true);
    assert.equal(identityMatches(parseTrustedIdentity("x509.subject:C=US, ST=WA, O=Acme\\, Inc., OU=Builds, CN=Builder"), leaf), true);
    assert.equal(describeSubject(leaf), "C=US, ST=WA, L=Seattle, O=Acme, Inc., OU=Builds, CN=Builder");
  });
  test("an identity is written back as a policy writes it, escapes included, and reads back the same", () => {
    for (const [text, written] of [
      ["x509.subject: O=Acme\\, Inc., ST=WA, C=US", "x509.subject: O=Acme\\, Inc., ST=WA, C=US"],
      ["x509.subject:C=US,ST=WA,O=A\\+B \\; C,CN=\\ lead\\=x", "x509.subject: C=US, ST=WA, O=A\\+B \\; C, CN=\\ lead\\=x"],
    ] as const) {
      const identity = parseTrustedIdentity(text);
      assert.equal(formatTrustedIdentity(identity), written);
      assert.deepEqual([...parseTrustedIdentity(formatTrustedIdentity(identity))], [...identity]);
    }
  });
  test("a different value, a differently cased one or an attribute the leaf lacks does not match", () => {
    const leaf = readChain(pki.chain).parsed[0]!;
    assert.equal(identityMatches(parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Acme\\, Inc., CN=Other"), leaf), false);
    assert.equal(identityMatches(parseTrustedIdentity("x509.subject: C=US, ST=wa, O=Acme\\, Inc."), leaf), false);
    assert.equal(identityMatches(parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Acme\\, Inc., SERIALNUMBER=1"), leaf), false);
  });
  for (const [text, reason] of [
    ["C=US, ST=WA, O=Acme", /starts with/],
    ["x509.subject: C=US, ST=WA", /O is required/],
    ["x509.subject: C=US, ST=WA, O=A, O=B", /appears twice/],
    ["x509.subject: C=US+ST=WA, O=A", /multi-valued/],
    ["x509.subject: C=US, ST=WA, O=A, E=a@example.com", /unsupported attribute/],
  ] as const)
    test(`${JSON.stringify(text)} is refused with its reason`, () => {
      const parsed = parseIdentity(text);
      assert.ok("error" in parsed, "refused");
      assert.match(parsed.error, reason);
    });
});

test("an identity whose attributes are a subset of another's overlaps it (Notation refuses the list)", async () => {
  const { overlappingIdentities } = await import("../../../src/core/image-policy/notary-identities.ts");
  const broad = parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Acme");
  const narrow = parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Acme, OU=Builds");
  const other = parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Other");
  assert.deepEqual(overlappingIdentities([narrow, other, broad]), [2, 0]);
  assert.equal(overlappingIdentities([narrow, other]), undefined);
});
