// RFC 3161 tokens at the edges of src/notation/notation-timestamp.ts, as the mutation run of the "notation-timestamp"
// area found them untested: tokens of another shape (another version, hash, content type, no or two signers, no
// signed attributes, attributes repeated or with two values, an unreadable signingCertificate), signed with
// RSASSA-PSS, carrying CRLs or other kinds of certificate, TSA chains of every length up to the limit and past it,
// cross-certified CAs and renewed roots, and the exact reasons given. The tokens are written here with pkijs (as
// test/support/notation/test-tsa.ts writes its own), never with the reader under test.
import assert from "node:assert/strict";
import { createHash, randomBytes, type KeyObject } from "node:crypto";
import { before, describe, test } from "node:test";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { NotationCertificateError } from "../../../src/notation/notation-certificates.ts";
import { NotationTimestampError, verifyTimestamp } from "../../../src/notation/notation-timestamp.ts";
import { TIME_STAMPING, createRoot, issue, type TestCertificate, type TestKeyType } from "../../support/notation/test-pki.ts";
import { createTestTsa, type TestTsa } from "../../support/notation/test-tsa.ts";

const STORE = "tsa:test";
const SIGNATURE = new Uint8Array(randomBytes(64));
const GEN_TIME = new Date(Math.floor(Date.now() / 1000) * 1000 - 5 * 60_000);

const OID = {
  sha1: "1.3.14.3.2.26",
  sha256: "2.16.840.1.101.3.4.2.1",
  data: "1.2.840.113549.1.7.1",
  signedData: "1.2.840.113549.1.7.2",
  tstInfo: "1.2.840.113549.1.9.16.1.4",
  contentType: "1.2.840.113549.1.9.3",
  messageDigest: "1.2.840.113549.1.9.4",
  signingCertificateV2: "1.2.840.113549.1.9.16.2.47",
  rsassaPss: "1.2.840.113549.1.1.10",
} as const;

/** What a forged token changes from a valid one (each default is what the test TSA writes). */
interface Forgery {
  tstVersion?: number;
  imprintHashOid?: string;
  /** The signer's digest algorithm (WebCrypto name). */
  digest?: "SHA-1" | "SHA-256";
  /** The signed attributes from the valid ones; null: none at all. */
  attributes?: (valid: pkijs.Attribute[]) => pkijs.Attribute[] | null;
  /** The ESS signingCertificateV2 value (DER) in place of the valid one. */
  signingCertificateValue?: (leaf: pkijs.Certificate) => asn1js.AsnType;
  signers?: number;
  certificates?: Array<pkijs.Certificate | pkijs.OtherCertificateFormat>;
  crls?: pkijs.CertificateRevocationList[];
  eContentType?: string;
  noEContent?: boolean;
  pss?: boolean;
  unsignedAttributes?: pkijs.Attribute[];
}

interface Signer {
  leaf: TestCertificate;
  /** The certificates the token carries by default, leaf first. */
  carried: TestCertificate[];
}

const certificateOf = (der: Uint8Array) => pkijs.Certificate.fromBER(Uint8Array.from(der));
const attribute = (type: string, ...values: asn1js.AsnType[]) => new pkijs.Attribute({ type, values });

function essCertIdV2(leaf: pkijs.Certificate, leafDer: Uint8Array, names: pkijs.GeneralName[]): asn1js.Sequence {
  const certHash = new asn1js.OctetString({ valueHex: createHash("sha256").update(leafDer).digest() });
  const issuerSerial = new asn1js.Sequence({ value: [new pkijs.GeneralNames({ names }).toSchema(), leaf.serialNumber] });
  return new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [certHash, issuerSerial] })] })] });
}

async function importKey(key: KeyObject, keyType: TestKeyType, pss: boolean, hash: string): Promise<CryptoKey> {
  const params = keyType.startsWith("rsa-")
    ? { name: pss ? "RSA-PSS" : "RSASSA-PKCS1-v1_5", hash }
    : { name: "ECDSA", namedCurve: keyType === "ec-p256" ? "P-256" : keyType === "ec-p384" ? "P-384" : "P-521" };
  return globalThis.crypto.subtle.importKey("pkcs8", key.export({ type: "pkcs8", format: "der" }), params, false, ["sign"]);
}

async function forge(signer: Signer, f: Forgery = {}): Promise<Uint8Array> {
  const digest = f.digest ?? "SHA-256";
  const nodeDigest = digest === "SHA-1" ? "sha1" : "sha256";
  const tstInfo = new pkijs.TSTInfo({
    version: f.tstVersion ?? 1,
    policy: "2.999.3161.1",
    messageImprint: new pkijs.MessageImprint({
      hashAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: f.imprintHashOid ?? OID.sha256 }),
      hashedMessage: new asn1js.OctetString({ valueHex: createHash("sha256").update(SIGNATURE).digest() }),
    }),
    serialNumber: new asn1js.Integer({ value: 7 }),
    genTime: GEN_TIME,
  });
  const tstDer = new Uint8Array(tstInfo.toSchema().toBER());
  const leaf = certificateOf(signer.leaf.der);
  const valid = [
    attribute(OID.contentType, new asn1js.ObjectIdentifier({ value: OID.tstInfo })),
    attribute(OID.messageDigest, new asn1js.OctetString({ valueHex: createHash(nodeDigest).update(tstDer).digest() })),
    attribute(
      OID.signingCertificateV2,
      f.signingCertificateValue
        ? f.signingCertificateValue(leaf)
        : essCertIdV2(leaf, signer.leaf.der, [new pkijs.GeneralName({ type: 4, value: leaf.issuer })]),
    ),
  ];
  const attributes = f.attributes ? f.attributes(valid) : valid;
  const signerInfo = () =>
    new pkijs.SignerInfo({
      version: 1,
      sid: new pkijs.IssuerAndSerialNumber({ issuer: leaf.issuer, serialNumber: leaf.serialNumber }),
      ...(attributes ? { signedAttrs: new pkijs.SignedAndUnsignedAttributes({ type: 0, attributes }) } : {}),
      ...(f.unsignedAttributes ? { unsignedAttrs: new pkijs.SignedAndUnsignedAttributes({ type: 1, attributes: f.unsignedAttributes }) } : {}),
    });
  const signers = f.signers ?? 1;
  const signedData = new pkijs.SignedData({
    version: 3,
    encapContentInfo: new pkijs.EncapsulatedContentInfo({ eContentType: f.eContentType ?? OID.tstInfo }),
    signerInfos: Array.from({ length: signers }, signerInfo),
    certificates: f.certificates ?? signer.carried.map((c) => certificateOf(c.der)),
    ...(f.crls ? { crls: f.crls } : {}),
  });
  if (!f.noEContent) signedData.encapContentInfo.eContent = new asn1js.OctetString({ valueHex: tstDer });
  const key = await importKey(signer.leaf.privateKey, signer.leaf.keyType, f.pss ?? false, digest);
  for (let i = 0; i < signers; i++) await signedData.sign(key, i, digest, f.noEContent ? tstDer : undefined);
  if (f.noEContent) signedData.encapContentInfo.eContent = undefined;
  const contentInfo = new pkijs.ContentInfo({ contentType: OID.signedData, content: signedData.toSchema(true) });
  return new Uint8Array(contentInfo.toSchema().toBER());
}

function verify(token: Uint8Array, store: readonly Uint8Array[]) {
  return verifyTimestamp(token, SIGNATURE, store, STORE);
}

function refused(
  run: () => unknown,
  errorClass: typeof NotationTimestampError | typeof NotationCertificateError,
  code: string,
  message: string | RegExp,
): void {
  assert.throws(run, (e: unknown) => {
    assert.ok(e instanceof errorClass, `expected a ${errorClass.name}, got ${String(e)}`);
    assert.ok(hasErrorCode(e, code), `expected code ${code}, got ${(e as NotationTimestampError).code}: ${(e as Error).message}`);
    if (typeof message === "string") assert.equal((e as Error).message, message);
    else assert.match((e as Error).message, message);
    return true;
  });
}

/** `token` (or the token it resolves to) refused against `store`. */
async function tokenRefused(
  token: Uint8Array | Promise<Uint8Array>,
  store: readonly Uint8Array[],
  errorClass: typeof NotationTimestampError | typeof NotationCertificateError,
  code: string,
  message: string | RegExp,
): Promise<void> {
  const bytes = await token;
  refused(() => verify(bytes, store), errorClass, code, message);
}

const MALFORMED = "the timestamp is not an RFC 3161 time-stamp token: ";

let ec: TestTsa;
let rsa: TestTsa;
let ecSigner: Signer;
let rsaSigner: Signer;
before(async () => {
  [ec, rsa] = await Promise.all([createTestTsa({ keyType: "ec-p256" }), createTestTsa({ keyType: "rsa-2048" })]);
  ecSigner = { leaf: ec.leaf, carried: [ec.leaf, ec.root] };
  rsaSigner = { leaf: rsa.leaf, carried: [rsa.leaf, rsa.root] };
  await forgeTokens();
});
const TOKENS: Record<string, Uint8Array> = {};

describe("the forged tokens' baseline", () => {
  test("a token forged here with nothing changed verifies, from an EC and an RSA TSA", async () => {
    assert.equal(verify(await forge(ecSigner), [ec.root.der]).genTime.toISOString(), GEN_TIME.toISOString());
    assert.equal(verify(await forge(rsaSigner), [rsa.root.der]).genTime.toISOString(), GEN_TIME.toISOString());
  });
});

describe("tokens of another shape", () => {
  test("a ContentInfo that is not signed data", () => {
    const data = new pkijs.ContentInfo({ contentType: OID.data, content: new asn1js.OctetString({ valueHex: new Uint8Array(4) }) });
    refused(
      () => verify(new Uint8Array(data.toSchema().toBER()), [ec.root.der]),
      NotationTimestampError,
      "malformed",
      `${MALFORMED}content type ${OID.data}, not signed data`,
    );
  });
  test("a ContentInfo of signed data without its content", () =>
    refused(
      () => verify(Uint8Array.from(Buffer.from("300d06092a864886f70d010702a000", "hex")), [ec.root.der]),
      NotationTimestampError,
      "malformed",
      /^the timestamp is not an RFC 3161 time-stamp token: /,
    ));
  test("signed data that encapsulates something else than a TSTInfo", async () => {
    refused(
      () => verify(TOKENS.eContentType!, [ec.root.der]),
      NotationTimestampError,
      "malformed",
      `${MALFORMED}encapsulated content ${OID.data}, not a TSTInfo`,
    );
  });
  test("signed data without its content", () =>
    refused(() => verify(TOKENS.noEContent!, [ec.root.der]), NotationTimestampError, "malformed", `${MALFORMED}no TSTInfo`));
  test("a TSTInfo of version 2", async () =>
    await tokenRefused(forge(ecSigner, { tstVersion: 2 }), [ec.root.der], NotationTimestampError, "malformed", "TSTInfo version 2, not 1"));
  test("an imprint by SHA-1", async () =>
    await tokenRefused(
      forge(ecSigner, { imprintHashOid: OID.sha1 }),
      [ec.root.der],
      NotationTimestampError,
      "imprint",
      `the timestamp's hash algorithm ${OID.sha1} is not SHA-256, -384 or -512`,
    ));
  test("no signer, or two", async () => {
    await tokenRefused(forge(ecSigner, { signers: 0 }), [ec.root.der], NotationTimestampError, "malformed", "the token has 0 signers, not one");
    await tokenRefused(forge(ecSigner, { signers: 2 }), [ec.root.der], NotationTimestampError, "malformed", "the token has 2 signers, not one");
  });
  test("bytes that are not BER are refused with the parser's reason", () => {
    refused(() => verify(new Uint8Array(), [ec.root.der]), NotationTimestampError, "malformed", `${MALFORMED}Input buffer has zero length`);
    refused(
      () => verify(Uint8Array.of(0x30, 0x05, 0x02), [ec.root.der]),
      NotationTimestampError,
      "malformed",
      `${MALFORMED}End of input reached before message was fully decoded (inconsistent offset and length values)`,
    );
  });
  test("bytes after the token are counted", async () => {
    const token = await forge(ecSigner);
    refused(() => verify(Uint8Array.of(...token, 0, 0), [ec.root.der]), NotationTimestampError, "malformed", `${MALFORMED}2 bytes after its end`);
  });
  test("a token nested deeper than any TSA writes one is refused, even where nothing else reads", async () => {
    let deep: asn1js.AsnType = new asn1js.Null();
    for (let i = 0; i < 40; i++) deep = new asn1js.Sequence({ value: [deep] });
    const token = await forge(ecSigner, { unsignedAttributes: [attribute("1.2.3.4", deep)] });
    refused(() => verify(token, [ec.root.der]), NotationTimestampError, "malformed", /^the timestamp is not an RFC 3161 time-stamp token: /);
    // Inside an OCTET STRING the same nesting is bytes, not read.
    const wrapped = new asn1js.OctetString({ valueHex: deep.toBER() });
    verify(await forge(ecSigner, { unsignedAttributes: [attribute("1.2.3.4", wrapped)] }), [ec.root.der]);
    // The same attribute, shallow, is ignored.
    verify(await forge(ecSigner, { unsignedAttributes: [attribute("1.2.3.4", new asn1js.Sequence({ value: [new asn1js.Null()] }))] }), [ec.root.der]);
  });
});

describe("signer infos and signed attributes", () => {
  test("a signer digest algorithm other than SHA-2", async () =>
    refused(
      () => verify(TOKENS.sha1Digest!, [ec.root.der]),
      NotationTimestampError,
      "signature",
      `the token's digest algorithm ${OID.sha1} is not SHA-256, -384 or -512`,
    ));
  test("no signed attributes", async () =>
    await tokenRefused(forge(ecSigner, { attributes: () => null }), [ec.root.der], NotationTimestampError, "signature", "the token has no signed attributes"));
  test("no message-digest attribute", async () =>
    refused(() => verify(TOKENS.noDigest!, [ec.root.der]), NotationTimestampError, "signature", "the token has no message-digest attribute"));
  test("an attribute given twice, or with two values, is named", async () => {
    const twice = await forge(ecSigner, { attributes: (a) => [a[0]!, a[0]!, a[1]!, a[2]!] });
    refused(
      () => verify(twice, [ec.root.der]),
      NotationTimestampError,
      "signature",
      "the token's signed content-type attribute is not one attribute with one value",
    );
    const twoValues = await forge(ecSigner, { attributes: (a) => [a[0]!, attribute(OID.messageDigest, ...a[1]!.values, ...a[1]!.values), a[2]!] });
    refused(
      () => verify(twoValues, [ec.root.der]),
      NotationTimestampError,
      "signature",
      "the token's signed message-digest attribute is not one attribute with one value",
    );
  });
  test("a repeated signingCertificateV2, or v1 signingCertificate, attribute is named", async () => {
    refused(
      () => verify(TOKENS.twoV2!, [ec.root.der]),
      NotationTimestampError,
      "signature",
      "the token's signed signingCertificateV2 attribute is not one attribute with one value",
    );
    refused(
      () => verify(TOKENS.twoV1!, [ec.root.der]),
      NotationTimestampError,
      "signature",
      "the token's signed signingCertificate attribute is not one attribute with one value",
    );
  });
  test("a signingCertificateV2 that is not one is refused with its reason", async () =>
    refused(
      () => verify(TOKENS.notEss!, [ec.root.der]),
      NotationTimestampError,
      "signature",
      "the token's signingCertificateV2 attribute cannot be read: it is not a SigningCertificate with an ESSCertID",
    ));
  test("a signingCertificateV2 hashing the certificate with SHA-1", async () =>
    refused(
      () => verify(TOKENS.v2Sha1!, [ec.root.der]),
      NotationTimestampError,
      "signature",
      `the signingCertificateV2 attribute's hash algorithm ${OID.sha1} is not SHA-256, -384 or -512`,
    ));
  test("a signingCertificateV2 naming another issuer with the TSA certificate's serial number", async () =>
    refused(
      () => verify(TOKENS.otherIssuer!, [ec.root.der]),
      NotationTimestampError,
      "signature",
      "the signingCertificateV2 attribute names another issuer and serial number than the signing certificate's",
    ));
  test("a signingCertificateV2 whose issuer names hold the right one among others", async () => {
    verify(TOKENS.namesAmongOthers!, [ec.root.der]);
  });
  test("a TSA signing with RSASSA-PSS", async () => {
    const token = await forge(rsaSigner, { pss: true });
    assert.equal(verify(token, [rsa.root.der]).genTime.toISOString(), GEN_TIME.toISOString());
  });
});

/** Tokens forged once, before the tests (assert.throws takes a function that does not wait). */
async function forgeTokens(): Promise<void> {
  TOKENS.eContentType = await forge(ecSigner, { eContentType: OID.data });
  TOKENS.noEContent = await forge(ecSigner, { noEContent: true });
  TOKENS.sha1Digest = await forge(ecSigner, { digest: "SHA-1" });
  TOKENS.noDigest = await forge(ecSigner, { attributes: (a) => [a[0]!, a[2]!] });
  const v1 = (leafDer: Uint8Array) => {
    const certHash = new asn1js.OctetString({ valueHex: createHash("sha1").update(leafDer).digest() });
    return new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [certHash] })] })] });
  };
  TOKENS.twoV2 = await forge(ecSigner, { attributes: (a) => [a[0]!, a[1]!, a[2]!, a[2]!] });
  TOKENS.twoV1 = await forge(ecSigner, {
    attributes: (a) => [a[0]!, a[1]!, attribute("1.2.840.113549.1.9.16.2.12", v1(ec.leaf.der)), attribute("1.2.840.113549.1.9.16.2.12", v1(ec.leaf.der))],
  });
  TOKENS.notEss = await forge(ecSigner, { signingCertificateValue: () => new asn1js.Integer({ value: 1 }) });
  TOKENS.v2Sha1 = await forge(ecSigner, {
    signingCertificateValue: () => {
      const algorithm = new pkijs.AlgorithmIdentifier({ algorithmId: OID.sha1 }).toSchema();
      const certHash = new asn1js.OctetString({ valueHex: createHash("sha1").update(ec.leaf.der).digest() });
      return new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [algorithm, certHash] })] })] });
    },
  });
  const otherName = certificateOf(rsa.leaf.der).subject;
  TOKENS.otherIssuer = await forge(ecSigner, {
    signingCertificateValue: (leaf) => essCertIdV2(leaf, ec.leaf.der, [new pkijs.GeneralName({ type: 4, value: otherName })]),
  });
  TOKENS.namesAmongOthers = await forge(ecSigner, {
    signingCertificateValue: (leaf) =>
      essCertIdV2(leaf, ec.leaf.der, [
        new pkijs.GeneralName({ type: 6, value: "https://tsa.example/" }),
        new pkijs.GeneralName({ type: 4, value: leaf.issuer }),
      ]),
  });
}

describe("the certificates a token carries and the store holds", () => {
  test("a garbage entry in the store is no signer, and makes the TSA's chain unreadable", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false });
    refused(
      () => verify(token, [new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x01]), ec.leaf.der, ec.root.der]),
      NotationCertificateError,
      "chain",
      /^certificate 0 of the chain cannot be read/,
    );
  });
  test("a token naming its signer by key identifier passes over store certificates without one", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false, sid: "subjectKeyIdentifier" });
    // ec.root has extensions but no subjectKeyIdentifier; a version 1 certificate has no extensions at all.
    const keys = (await globalThis.crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const v1 = new pkijs.Certificate({ version: 0, serialNumber: new asn1js.Integer({ value: 5 }) });
    v1.subject.typesAndValues.push(new pkijs.AttributeTypeAndValue({ type: "2.5.4.3", value: new asn1js.Utf8String({ value: "Version 1" }) }));
    v1.issuer.typesAndValues.push(new pkijs.AttributeTypeAndValue({ type: "2.5.4.3", value: new asn1js.Utf8String({ value: "Version 1" }) }));
    v1.notBefore.value = new Date(Date.now() - 3_600_000);
    v1.notAfter.value = new Date(Date.now() + 3_600_000);
    await v1.subjectPublicKeyInfo.importKey(keys.publicKey);
    await v1.sign(keys.privateKey, "SHA-256");
    const bare = { rawData: v1.toSchema().toBER() };
    const result = verify(token, [new Uint8Array(bare.rawData), ec.root.der, ec.leaf.der]);
    assert.deepEqual(result.tsaChain.der, [ec.leaf.der, ec.root.der]);
  });
  test("the TSA's issuer is found wherever it stands, and a certificate that did not issue it is passed over", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false });
    assert.deepEqual(verify(token, [ec.root.der, ec.leaf.der]).tsaChain.der, [ec.leaf.der, ec.root.der]);
    assert.deepEqual(verify(token, [ec.leaf.der, rsa.root.der, ec.root.der]).tsaChain.der, [ec.leaf.der, ec.root.der]);
  });
  test("a TSA whose issuer is nowhere is refused for its chain", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME, includeCertificates: false });
    refused(() => verify(token, [ec.leaf.der]), NotationCertificateError, "chain", /does not end in a self-signed root/);
  });
  test("the chain returned stays as verified when the caller reuses the token's buffer", async () => {
    const token = await ec.timestamp(SIGNATURE, { genTime: GEN_TIME });
    const result = verify(token, [ec.root.der]);
    token.fill(0);
    assert.deepEqual(result.tsaChain.der, [ec.leaf.der, ec.root.der]);
  });
  test("revocation information in the token is not taken for certificates, with or without certificates", async () => {
    // An OCSP response by reference ([1] OtherRevocationInfoFormat). (A CRL itself, the CertificateList choice, is
    // refused as malformed: @peculiar/asn1-cms's RevocationInfoChoice knows only the other choice.)
    const crls = [
      new pkijs.OtherRevocationInfoFormat({
        otherRevInfoFormat: "1.3.6.1.5.5.7.16.2",
        otherRevInfo: new asn1js.Sequence({ value: [new asn1js.Integer({ value: 0 })] }),
      }),
    ];
    verify(await forge(ecSigner, { crls: crls as unknown as pkijs.CertificateRevocationList[] }), [ec.root.der]);
    verify(await forge(ecSigner, { crls: crls as unknown as pkijs.CertificateRevocationList[], certificates: [] }), [ec.leaf.der, ec.root.der]);
  });
  test("a token carrying something that is not a certificate is malformed", async () => {
    const notCertificate = { toSchema: () => new asn1js.Sequence({ value: [new asn1js.Integer({ value: 1 })] }) } as unknown as pkijs.Certificate;
    await tokenRefused(
      forge(ecSigner, { certificates: [notCertificate, certificateOf(ec.leaf.der), certificateOf(ec.root.der)] }),
      [ec.root.der],
      NotationTimestampError,
      "malformed",
      /^the timestamp is not an RFC 3161 time-stamp token: /,
    );
  });
  test("other kinds of certificate in the token are passed over", async () => {
    const other = new pkijs.OtherCertificateFormat({ otherCertFormat: "1.2.3.4", otherCert: new asn1js.Null() });
    verify(await forge(ecSigner, { certificates: [other, certificateOf(ec.leaf.der), certificateOf(ec.root.der)] }), [ec.root.der]);
  });
});

describe("TSA chains through CAs", () => {
  /** root → n CAs → TSA leaf; the chain leaf first. */
  async function tsaChain(cas: number): Promise<TestCertificate[]> {
    const root = await createRoot({ subject: "C=US, ST=WA, O=T, CN=TSA Root" });
    let issuer = root;
    const above: TestCertificate[] = [root];
    for (let i = 0; i < cas; i++) {
      issuer = await issue(issuer, { subject: `C=US, ST=WA, O=T, CN=TSA CA ${i}`, isCa: true });
      above.unshift(issuer);
    }
    const leaf = await issue(issuer, {
      subject: "C=US, ST=WA, O=T, CN=TSA",
      extendedKeyUsage: { usages: [TIME_STAMPING], critical: true },
      keyUsage: { flags: x509.KeyUsageFlags.digitalSignature, critical: true },
    });
    return [leaf, ...above];
  }
  test("a chain of nine certificates is the longest followed", async () => {
    const nine = await tsaChain(7);
    const result = verify(await forge({ leaf: nine[0]!, carried: nine }), [nine.at(-1)!.der]);
    assert.equal(result.tsaChain.der.length, 9);
    const ten = await tsaChain(8);
    await tokenRefused(forge({ leaf: ten[0]!, carried: ten }), [ten.at(-1)!.der], NotationCertificateError, "chain", /does not end in a self-signed root/);
  });
  test("a root renewed with the same key and name is not followed past", async () => {
    const root = await createRoot({ subject: "C=US, ST=WA, O=R, CN=Renewed Root" });
    const renewed = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: "0777",
      name: root.cert.subjectName.toString(),
      keys: {
        privateKey: await importKey(root.privateKey, root.keyType, false, "SHA-256"),
        publicKey: await root.cert.publicKey.export(),
      },
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
      extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
    });
    const leaf = await issue(root, {
      subject: "C=US, ST=WA, O=R, CN=TSA",
      extendedKeyUsage: { usages: [TIME_STAMPING], critical: true },
      keyUsage: { flags: x509.KeyUsageFlags.digitalSignature, critical: true },
    });
    const result = verify(await forge({ leaf, carried: [leaf, root] }), [root.der, new Uint8Array(renewed.rawData)]);
    assert.deepEqual(result.tsaChain.der, [leaf.der, root.der]);
  });
  test("cross-certified CAs are each taken once, up to a root", async () => {
    // X and Y certify each other; X also has a self-signed root certificate of the same key and name.
    const xRoot = await createRoot({ subject: "C=US, ST=WA, O=X, CN=X" });
    const yRoot = await createRoot({ subject: "C=US, ST=WA, O=Y, CN=Y" });
    const cross = async (subject: TestCertificate, by: TestCertificate) => {
      const cert = await x509.X509CertificateGenerator.create({
        serialNumber: randomBytes(8).toString("hex"),
        subject: subject.cert.subjectName,
        issuer: by.cert.subjectName,
        publicKey: subject.cert.publicKey,
        signingKey: await importKey(by.privateKey, by.keyType, false, "SHA-256"),
        signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
        notBefore: new Date(Date.now() - 3_600_000),
        notAfter: new Date(Date.now() + 3_600_000),
        extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
      });
      return new Uint8Array(cert.rawData);
    };
    const xByY = await cross(xRoot, yRoot);
    const yByX = await cross(yRoot, xRoot);
    const leaf = await issue(xRoot, {
      subject: "C=US, ST=WA, O=X, CN=TSA",
      extendedKeyUsage: { usages: [TIME_STAMPING], critical: true },
      keyUsage: { flags: x509.KeyUsageFlags.digitalSignature, critical: true },
    });
    const forged = await forge({ leaf, carried: [leaf] });
    const result = verify(forged, [xByY, yByX, xRoot.der]);
    assert.deepEqual(result.tsaChain.der, [leaf.der, xByY, yByX, xRoot.der]);
  });
});
