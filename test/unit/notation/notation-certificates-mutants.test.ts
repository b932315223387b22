// The certificate rules of src/notation/notation-certificates.ts at their edges, as the mutation run of the
// "notation-certificates" area found them untested: an empty or unreadable chain, SHA-1 signatures, every key type
// and curve the profile allows or refuses, a time-stamping leaf's key usage and EKU, a CA's key usage, the exact
// words of the refusals, the last instant of a validity period, and subject attributes that @peculiar/x509 names
// by OID.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { before, describe, test } from "node:test";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { parseTrustedIdentity } from "../../../src/core/image-policy/notary-identities.ts";
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
import {
  CODE_SIGNING,
  SERVER_AUTH,
  TIME_STAMPING,
  codeSigningChain,
  createRoot,
  issue,
  toWebCrypto,
  type TestCertificate,
} from "../../support/notation/test-pki.ts";

const KU = x509.KeyUsageFlags;
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const HOUR = 3_600_000;

let pki: Awaited<ReturnType<typeof codeSigningChain>>;
before(async () => {
  pki = await codeSigningChain();
});

function refused(fn: () => unknown, code: string, message: string | RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(hasErrorCode(e, code), `refused with code ${code}, got ${String(e)}`);
    if (typeof message === "string") assert.equal((e as Error).message, message);
    else assert.match((e as Error).message, message);
    return true;
  });
}

function profileOf(chain: readonly Uint8Array[], purpose: CertificatePurpose = "codeSigning"): void {
  checkChainProfile(readChain(chain), purpose);
}

/** A code-signing leaf issued by the chain's intermediate for a public key of any type (SPKI DER), signed as `signingAlgorithm` says. */
async function leafFor(
  spki: Uint8Array<ArrayBuffer>,
  signingAlgorithm: Algorithm | EcdsaParams = { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
): Promise<Uint8Array> {
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: "0a1b2c3d",
    subject: "C=US, ST=WA, O=X, CN=Leaf",
    issuer: pki.intermediate.cert.subjectName,
    publicKey: new x509.PublicKey(spki),
    signingKey: await toWebCrypto(pki.intermediate.privateKey, pki.intermediate.keyType, "sign"),
    signingAlgorithm,
    notBefore: new Date(Date.now() - HOUR),
    notAfter: new Date(Date.now() + HOUR),
    extensions: [new x509.BasicConstraintsExtension(false, undefined, true), new x509.KeyUsagesExtension(KU.digitalSignature, true)],
  });
  return new Uint8Array(cert.rawData);
}

function spkiOf(pair: { publicKey: { export(o: { type: "spki"; format: "der" }): Buffer } }): Uint8Array<ArrayBuffer> {
  return new Uint8Array(pair.publicKey.export({ type: "spki", format: "der" }));
}

describe("a chain that cannot be read", () => {
  test("no certificate at all is refused, with its reason", () => refused(() => readChain([]), "chain", "the signature carries no certificate"));
  test("a certificate that is not DER is refused, named by its place in the chain", () =>
    refused(
      () => readChain([pki.leaf.der, new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x01]), pki.root.der]),
      "chain",
      /^certificate 1 of the chain cannot be read: /,
    ));
});

describe("signature algorithms and keys", () => {
  test("a leaf signed with SHA-1 is refused", async () => {
    const leaf = await leafFor(spkiOf(generateKeyPairSync("ec", { namedCurve: "prime256v1" })), { name: "ECDSA", hash: "SHA-1" } as EcdsaParams);
    refused(() => profileOf([leaf, pki.intermediate.der, pki.root.der]), "profile", "certificate 0 is signed with SHA-1");
  });
  test("an Ed25519 CA is refused for its key, not for the signature algorithm it signs with", async () => {
    const keys = (await globalThis.crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const root = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: "01",
      name: "C=US, ST=WA, O=E, CN=Ed Root",
      keys,
      signingAlgorithm: { name: "Ed25519" },
      extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(KU.keyCertSign, true)],
    });
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: "02",
      subject: "C=US, ST=WA, O=E, CN=Leaf",
      issuer: root.subjectName,
      publicKey: new x509.PublicKey(spkiOf(generateKeyPairSync("ec", { namedCurve: "prime256v1" }))),
      signingKey: keys.privateKey,
      signingAlgorithm: { name: "Ed25519" },
      extensions: [new x509.BasicConstraintsExtension(false, undefined, true), new x509.KeyUsagesExtension(KU.digitalSignature, true)],
    });
    refused(() => profileOf([new Uint8Array(leaf.rawData), new Uint8Array(root.rawData)]), "profile", "certificate 1 has a ed25519 key (RSA or EC)");
  });
  test("an Ed25519 leaf is refused as neither RSA nor EC", async () => {
    const leaf = await leafFor(spkiOf(generateKeyPairSync("ed25519")));
    refused(() => profileOf([leaf, pki.intermediate.der, pki.root.der]), "profile", "certificate 0 has a ed25519 key (RSA or EC)");
  });
  test("an EC key on a curve other than P-256, P-384 or P-521 is refused, naming the curve", async () => {
    const leaf = await leafFor(spkiOf(generateKeyPairSync("ec", { namedCurve: "secp256k1" })));
    refused(() => profileOf([leaf, pki.intermediate.der, pki.root.der]), "profile", "certificate 0 has an EC key on secp256k1 (P-256, P-384 or P-521)");
  });
  for (const keyType of ["ec-p384", "ec-p521"] as const)
    test(`a leaf with a ${keyType} key passes`, async () => {
      const leaf = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=Leaf", keyType });
      profileOf([leaf.der, pki.intermediate.der, pki.root.der]);
    });
  test("an RSASSA-PSS key is judged as RSA: 2048 bits pass, 1024 are refused", async () => {
    profileOf([await leafFor(spkiOf(generateKeyPairSync("rsa-pss", { modulusLength: 2048 }))), pki.intermediate.der, pki.root.der]);
    const weak = await leafFor(spkiOf(generateKeyPairSync("rsa-pss", { modulusLength: 1024 })));
    refused(() => profileOf([weak, pki.intermediate.der, pki.root.der]), "profile", "certificate 0 has an RSA key of 1024 bits (at least 2048)");
  });
});

describe("leaf and CA profiles", () => {
  test("a time-stamping leaf's keyUsage need not be critical; a code-signing leaf's must", async () => {
    const tsa = await issue(pki.intermediate, {
      subject: "C=US, ST=WA, O=X, CN=TSA",
      keyUsage: { flags: KU.digitalSignature, critical: false },
      extendedKeyUsage: { usages: [TIME_STAMPING], critical: true },
    });
    profileOf([tsa.der, pki.intermediate.der, pki.root.der], "timeStamping");
    refused(() => profileOf([tsa.der, pki.intermediate.der, pki.root.der], "codeSigning"), "profile", /not marked critical/);
  });
  test("a time-stamping leaf with another EKU besides id-kp-timeStamping is refused", async () => {
    const tsa = await issue(pki.intermediate, {
      subject: "C=US, ST=WA, O=X, CN=TSA",
      extendedKeyUsage: { usages: [TIME_STAMPING, CODE_SIGNING], critical: true },
    });
    refused(
      () => profileOf([tsa.der, pki.intermediate.der, pki.root.der], "timeStamping"),
      "profile",
      "the time-stamping certificate's extendedKeyUsage must be id-kp-timeStamping alone, marked critical",
    );
  });
  test("every forbidden EKU of a code-signing leaf is named", async () => {
    const leaf = await issue(pki.intermediate, {
      subject: "C=US, ST=WA, O=X, CN=Leaf",
      extendedKeyUsage: { usages: [CODE_SIGNING, SERVER_AUTH, CLIENT_AUTH] },
    });
    refused(
      () => profileOf([leaf.der, pki.intermediate.der, pki.root.der]),
      "profile",
      `the signing certificate's extendedKeyUsage includes ${SERVER_AUTH}, ${CLIENT_AUTH}, which a code-signing certificate must not`,
    );
  });
  test("a CA whose keyUsage is not critical is refused, and so is one without keyUsage", async () => {
    for (const keyUsage of [{ flags: KU.keyCertSign | KU.cRLSign, critical: false }, "absent"] as const) {
      const ca = await issue(pki.root, { subject: "C=US, ST=WA, O=X, CN=CA", isCa: true, keyUsage });
      const leaf = await issue(ca, { subject: "C=US, ST=WA, O=X, CN=Leaf" });
      refused(
        () => profileOf([leaf.der, ca.der, pki.root.der]),
        "profile",
        "certificate 1 issues certificates but its keyUsage lacks keyCertSign (or is not critical)",
      );
    }
  });
});

describe("the words of a refusal", () => {
  test("a chain without its root names the certificate it ends in, as a subject is written", () =>
    refused(
      () => profileOf([pki.leaf.der, pki.intermediate.der]),
      "chain",
      "the chain does not end in a self-signed root (C=US\nST=WA\nO=Example\nCN=Example Signing CA)".replace(/\n/g, ", "),
    ));
  test("an untrusted chain names its last certificate, as a subject is written", async () => {
    const other: TestCertificate = await createRoot({ subject: "C=US, ST=WA, O=O, CN=Other Root" });
    refused(
      () => checkTrusted(readChain(pki.chain), [other.der], "the entry's certs (ca)"),
      "untrusted",
      "no certificate of the chain is in the entry's certs (ca): the chain ends in C=US, ST=WA, O=Example, CN=Example Root",
    );
  });
});

describe("validity at its edges", () => {
  test("a chain is valid at its certificates' first and last instants, and not a second later", () => {
    const chain = readChain(pki.chain);
    const notBefore = new Date(Math.max(...chain.node.map((c) => new Date(c.validFrom).getTime())));
    const notAfter = new Date(Math.min(...chain.node.map((c) => new Date(c.validTo).getTime())));
    checkValidity(chain, notBefore, notBefore, "its first instant");
    checkValidity(chain, notAfter, notAfter, "its last instant");
    checkValidity(chain, notBefore, notAfter, "its whole period");
    refused(
      () => checkValidity(chain, notAfter, new Date(notAfter.getTime() + 1000), "a second later"),
      "validity",
      /^certificate 0 .* not at a second later$/,
    );
  });
});

describe("subject attributes named by OID", () => {
  test("a leaf's serial number attribute matches a SERIALNUMBER identity and is written as one", async () => {
    const leaf = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, 2.5.4.5=1234, CN=Leaf" });
    const identity = (text: string) => {
      const parsed = parseTrustedIdentity(text);
      if ("error" in parsed) throw new Error(parsed.error);
      return parsed.identity;
    };
    assert.equal(identityMatches(identity("x509.subject: C=US, ST=WA, O=X, SERIALNUMBER=1234"), leaf.cert), true);
    assert.equal(identityMatches(identity("x509.subject: C=US, ST=WA, O=X, SERIALNUMBER=4321"), leaf.cert), false);
    assert.equal(describeSubject(leaf.cert), "C=US, ST=WA, O=X, SERIALNUMBER=1234, CN=Leaf");
  });
  test("an identity's value must be the leaf's own, for an attribute the leaf has or lacks, whatever the value", async () => {
    const leaf = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=Leaf" });
    // Any text at all, including the placeholder a mutation tool writes into an empty list.
    for (const value of ["Y", "Leaf ", "Stryker was here"]) {
      for (const text of [`x509.subject: C=US, ST=WA, O=${value}`, `x509.subject: C=US, ST=WA, O=X, OU=${value}`]) {
        const parsed = parseTrustedIdentity(text);
        if ("error" in parsed) throw new Error(parsed.error);
        assert.equal(identityMatches(parsed.identity, leaf.cert), false, text);
      }
    }
  });
  test("a multi-valued RDN is written with its values joined by +", async () => {
    const leaf = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=Leaf+CN=Builder" });
    assert.equal(describeSubject(leaf.cert), "C=US, ST=WA, O=X, CN=Leaf+Builder");
  });
});
