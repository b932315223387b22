// The RFC 3161 countersignature of a notary.x509 signature (src/notation/notation-timestamp.ts): tokens from the test
// TSA (written with pkijs, not with the reader under test) verify with the TSA's time window, and each broken rule
// (other bytes, a bad signature or signed attribute, an ESS signing-certificate attribute missing or naming another
// certificate, the TSA's certificate profile, trust and validity) is refused with its code.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { before, describe, test } from "node:test";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { NotationCertificateError } from "../../../src/notation/notation-certificates.ts";
import { NotationTimestampError, verifyTimestamp, type VerifiedTimestamp } from "../../../src/notation/notation-timestamp.ts";
import { CODE_SIGNING, createRoot, type TestCertificate } from "../../support/notation/test-pki.ts";
import { createTestTsa, ETSI_BASELINE_POLICY, type TestTsa } from "../../support/notation/test-tsa.ts";

const STORE = "tsa:test";
/** The bytes a notary.x509 signature would time-stamp: its raw signature. */
const SIGNATURE = new Uint8Array(randomBytes(64));
/** A few minutes ago, in whole seconds: within the test certificates' validity (from an hour before their creation). */
const GEN_TIME = new Date(Math.floor(Date.now() / 1000) * 1000 - 5 * 60_000);

let ec: TestTsa;
let rsa: TestTsa;
before(async () => {
  [ec, rsa] = await Promise.all([createTestTsa({ keyType: "ec-p256" }), createTestTsa({ keyType: "rsa-2048" })]);
});

function verify(tsa: TestTsa, token: Uint8Array, store: readonly Uint8Array[] = [tsa.root.der], signature = SIGNATURE): VerifiedTimestamp {
  return verifyTimestamp(token, signature, store, STORE);
}

function assertWindow(result: VerifiedTimestamp, genTime: Date, accuracyMs: number): void {
  assert.equal(result.genTime.toISOString(), genTime.toISOString());
  assert.equal(result.earliest.toISOString(), new Date(genTime.getTime() - accuracyMs).toISOString());
  assert.equal(result.latest.toISOString(), new Date(genTime.getTime() + accuracyMs).toISOString());
}

function refused(run: () => unknown, errorClass: typeof NotationTimestampError | typeof NotationCertificateError, code: string, message?: RegExp): void {
  assert.throws(run, (e: unknown) => {
    assert.ok(e instanceof errorClass, `expected a ${errorClass.name}, got ${String(e)}`);
    assert.ok(hasErrorCode(e, code), `expected code ${code}, got ${(e as NotationTimestampError).code}: ${(e as Error).message}`);
    if (message) assert.match((e as Error).message, message);
    return true;
  });
}

describe("valid time-stamp tokens", () => {
  for (const [name, tsa] of [
    ["an EC P-256 TSA", () => ec],
    ["an RSA-2048 TSA", () => rsa],
  ] as const)
    test(`from ${name}, with an accuracy of 1 s 500 ms`, async () => {
      const token = await tsa().timestamp(SIGNATURE, { genTime: GEN_TIME, accuracy: { seconds: 1, millis: 500 } });
      const result = verify(tsa(), token);
      assertWindow(result, GEN_TIME, 1500);
      assert.deepEqual(result.tsaChain.der, [tsa().leaf.der, tsa().root.der]);
    });

  test("without accuracy: the window is genTime alone", async () => {
    assertWindow(verify(ec, await ec.timestamp(SIGNATURE, { genTime: GEN_TIME })), GEN_TIME, 0);
  });

  test("without accuracy under the ETSI baseline policy: one second either side", async () => {
    assertWindow(verify(ec, await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, policy: ETSI_BASELINE_POLICY })), GEN_TIME, 1000);
  });

  test("an accuracy with microseconds widens the window to whole milliseconds", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, accuracy: { millis: 2, micros: 1 } });
    assertWindow(verify(ec, token), GEN_TIME, 3);
  });

  test("a genTime with milliseconds", async () => {
    const genTime = new Date(GEN_TIME.getTime() + 250);
    assertWindow(verify(rsa, await rsa.timestamp(SIGNATURE, { genTime, accuracy: { seconds: 2 } })), genTime, 2000);
  });

  for (const hash of ["sha384", "sha512"] as const)
    test(`a ${hash.toUpperCase()} imprint (and signer digest)`, async () => {
      assertWindow(verify(rsa, await rsa.timestamp(SIGNATURE, { genTime: GEN_TIME, hash })), GEN_TIME, 0);
      assertWindow(verify(ec, await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, hash })), GEN_TIME, 0);
    });

  test("a signer named by its subject key identifier", async () => {
    for (const tsa of [ec, rsa]) assertWindow(verify(tsa, await tsa.timestamp(SIGNATURE, { genTime: GEN_TIME, sid: "subjectKeyIdentifier" })), GEN_TIME, 0);
  });

  test("a token without certificates, when the store holds the TSA's leaf and root", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false });
    const result = verify(ec, token, [ec.leaf.der, ec.root.der]);
    assert.deepEqual(result.tsaChain.der, [ec.leaf.der, ec.root.der]);
  });

  test("a TSTInfo in a BER constructed OCTET STRING (which CMS allows)", async () => {
    for (const tsa of [ec, rsa]) {
      const token = await tsa.timestamp(SIGNATURE, { genTime: GEN_TIME, accuracy: { seconds: 1 }, berContent: true, berChunk: 16 });
      assertWindow(verify(tsa, token), GEN_TIME, 1000);
    }
  });

  test("a TSTInfo in a constructed OCTET STRING whose pieces nest another", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, accuracy: { seconds: 1 }, berContent: true, berChunk: 16, berNested: true });
    assertWindow(verify(ec, token), GEN_TIME, 1000);
  });

  test("an ESS signingCertificateV2 without issuerSerial, or with a SHA-384 certHash", async () => {
    for (const spec of [
      { version: 2, issuerSerialOf: null },
      { version: 2, hash: "sha384" },
    ] as const)
      assertWindow(verify(rsa, await rsa.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [spec] })), GEN_TIME, 0);
  });

  test("only the v1 ESS signingCertificate (a SHA-1 certHash), with or without issuerSerial", async () => {
    for (const tsa of [ec, rsa])
      for (const spec of [{ version: 1 }, { version: 1, issuerSerialOf: null }] as const)
        assertWindow(verify(tsa, await tsa.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [spec] })), GEN_TIME, 0);
  });
});

describe("refused time-stamp tokens", () => {
  test("bytes that are not a token", async () => {
    refused(() => verify(ec, new TextEncoder().encode("not a time-stamp token")), NotationTimestampError, "malformed");
    refused(() => verify(ec, new Uint8Array()), NotationTimestampError, "malformed");
    refused(() => verify(ec, ec.root.der), NotationTimestampError, "malformed");
  });

  test("a token with bytes after its end", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME });
    refused(() => verify(ec, Uint8Array.of(...token, 0)), NotationTimestampError, "malformed", /after its end/);
  });

  test("a token over other bytes", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, imprintOf: new TextEncoder().encode("other bytes") });
    refused(() => verify(ec, token), NotationTimestampError, "imprint", /other bytes than this signature/);
    const honest = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME });
    refused(() => verify(ec, honest, [ec.root.der], new Uint8Array(randomBytes(64))), NotationTimestampError, "imprint");
  });

  test("a corrupted TSA signature", async () => {
    for (const tsa of [ec, rsa]) {
      const token = await tsa.timestamp(SIGNATURE, { genTime: GEN_TIME, corruptSignature: true });
      refused(() => verify(tsa, token), NotationTimestampError, "signature", /does not verify/);
    }
  });

  test("a message-digest attribute that is not the TSTInfo's", async () => {
    const token = await rsa.timestamp(SIGNATURE, { genTime: GEN_TIME, wrongMessageDigest: true });
    refused(() => verify(rsa, token), NotationTimestampError, "signature", /message digest/);
  });

  test("no content-type attribute", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, omitContentTypeAttribute: true });
    refused(() => verify(ec, token), NotationTimestampError, "signature", /content-type/);
  });

  test("without an ESS signing-certificate attribute", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [] });
    refused(() => verify(ec, token), NotationTimestampError, "signature", /no signing-certificate attribute/);
  });

  test("an ESS signingCertificateV2 whose certHash names another certificate", async () => {
    for (const other of [ec.root.der, rsa.leaf.der]) {
      const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [{ version: 2, hashOf: other }] });
      refused(() => verify(ec, token), NotationTimestampError, "signature", /names another certificate/);
    }
  });

  test("an ESS signingCertificateV2 whose issuerSerial names another certificate", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [{ version: 2, issuerSerialOf: ec.root.der }] });
    refused(() => verify(ec, token), NotationTimestampError, "signature", /issuer and serial number/);
  });

  test("a v1 ESS signingCertificate whose certHash names another certificate", async () => {
    const token = await rsa.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [{ version: 1, hashOf: rsa.root.der }] });
    refused(() => verify(rsa, token), NotationTimestampError, "signature", /signingCertificate attribute names another certificate/);
  });

  test("a wrong signingCertificateV2 beside a right v1 signingCertificate: v1 stands in only for a missing v2", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [{ version: 1 }, { version: 2, hashOf: ec.root.der }] });
    refused(() => verify(ec, token), NotationTimestampError, "signature", /signingCertificateV2 attribute names another certificate/);
  });

  test("two signingCertificateV2 attributes", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, signingCertificate: [{ version: 2 }, { version: 2 }] });
    refused(() => verify(ec, token), NotationTimestampError, "signature", /not one attribute with one value/);
  });

  test("a TSA leaf whose extendedKeyUsage is codeSigning", async () => {
    const codeSigner = await createTestTsa({ leaf: { extendedKeyUsage: { usages: [CODE_SIGNING], critical: true } } });
    const token = await codeSigner.timestamp(SIGNATURE, { genTime: GEN_TIME });
    refused(() => verify(codeSigner, token), NotationCertificateError, "profile", /id-kp-timeStamping/);
  });

  test("a TSA leaf whose timeStamping extendedKeyUsage is not critical", async () => {
    const lax = await createTestTsa({ leaf: { extendedKeyUsage: { usages: ["1.3.6.1.5.5.7.3.8"], critical: false } } });
    const token = await lax.timestamp(SIGNATURE, { genTime: GEN_TIME });
    refused(() => verify(lax, token), NotationCertificateError, "profile", /critical/);
  });

  test("a TSA whose chain is not in the store", async () => {
    const other: TestCertificate = await createRoot({ subject: "C=US, ST=WA, O=Other, CN=Other TSA Root" });
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME });
    refused(() => verify(ec, token, [other.der]), NotationCertificateError, "untrusted", /tsa:test/);
    refused(() => verify(ec, token, []), NotationCertificateError, "untrusted");
  });

  test("a signer certificate neither the token nor the store holds", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false });
    refused(() => verify(ec, token, [ec.root.der]), NotationTimestampError, "signature", /neither it nor the tsa trust store/);
    const bySki = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false, sid: "subjectKeyIdentifier" });
    refused(() => verify(ec, bySki, [ec.root.der]), NotationTimestampError, "signature");
  });

  test("a signer certificate of another TSA under the same root name", async () => {
    // The store's other TSA has another serial: the signer info names no certificate present.
    const token = await rsa.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false });
    refused(() => verify(rsa, token, [ec.leaf.der, ec.root.der]), NotationTimestampError, "signature");
  });

  test("a genTime outside the TSA certificate's validity", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: new Date(GEN_TIME.getTime() - 24 * 3_600_000) });
    refused(() => verify(ec, token), NotationCertificateError, "validity", /genTime/);
  });
});
