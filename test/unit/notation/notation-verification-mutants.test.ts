// Revocation answers and verification outcomes at the edges of src/notation/notation-revocation.ts and
// notation-verification.ts, as the mutation run of the "notation-verification" area found them untested. The OCSP
// responses and CRLs are written here (with @peculiar/asn1-ocsp and @peculiar/x509, signed by node:crypto) and
// handed over by a fetcher in memory, so that each field can be set on its own: every response status, responder
// identified by name or key, delegated responders and their validity with the allowed clock skew, CertIDs by
// every hash, serial numbers with leading zeros, every signature algorithm, every revocation reason, delta and
// future CRLs; and the outcome's identity, expiry at its instant, timestamps verified only after a certificate
// expired, and the reasons given.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from "node:crypto";
import { before, describe, test } from "node:test";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { AlgorithmIdentifier, Certificate, CRLReason, DistributionPoint, GeneralName, Name } from "@peculiar/asn1-x509";
import {
  CertID,
  CertStatus,
  OCSPResponse,
  OCSPResponseStatus,
  ResponderID,
  ResponseBytes,
  ResponseData,
  RevokedInfo,
  SingleResponse,
  id_pkix_ocsp_basic,
} from "@peculiar/asn1-ocsp";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { parseTrustedIdentity } from "../../../src/core/image-policy/notary-identities.ts";
import { readChain } from "../../../src/notation/notation-certificates.ts";
import { checkChainRevocation, judgeCrl, judgeOcspResponse, revocationUrls, type RevocationFetcher } from "../../../src/notation/notation-revocation.ts";
import { verifyNotationSignature, type NotationTrust } from "../../../src/notation/notation-verification.ts";
import { notationPayload, signJwsEnvelope } from "../../support/notation/jws-signer.ts";
import { OCSP_SIGNING, TIME_STAMPING, createRoot, issue, toWebCrypto, type TestCertificate } from "../../support/notation/test-pki.ts";
import { createTestTsa } from "../../support/notation/test-tsa.ts";

const MINUTE = 60_000;
const SKEW = 5 * MINUTE;
const OCSP_URL = "http://ocsp.test/";
const CRL_URL = "http://crl.test/ca.crl";
const SHA1 = "1.3.14.3.2.26";
const HASH_OIDS = { sha1: SHA1, sha256: "2.16.840.1.101.3.4.2.1", sha384: "2.16.840.1.101.3.4.2.2", sha512: "2.16.840.1.101.3.4.2.3" } as const;
const SIG = {
  "ecdsa-sha256": "1.2.840.10045.4.3.2",
  "ecdsa-sha384": "1.2.840.10045.4.3.3",
  "ecdsa-sha512": "1.2.840.10045.4.3.4",
  "rsa-sha256": "1.2.840.113549.1.1.11",
  "rsa-sha384": "1.2.840.113549.1.1.12",
  "rsa-sha512": "1.2.840.113549.1.1.13",
  ed25519: "1.3.101.112",
  "rsa-sha1": "1.2.840.113549.1.1.5",
} as const;
type SigName = keyof typeof SIG;

/** A CA: its certificate and private key. */
interface Issuer {
  cert: TestCertificate;
  parsed: x509.X509Certificate;
  privateKey: KeyObject;
}
const issuerOf = (cert: TestCertificate): Issuer => ({ cert, parsed: cert.cert, privateKey: cert.privateKey });
const judgeIssuer = (i: Issuer) => ({ parsed: i.parsed, key: readChain([i.cert.der]).node[0]!.publicKey });

function spkiBits(cert: x509.X509Certificate): ArrayBuffer {
  return AsnConvert.parse(cert.rawData, Certificate).tbsCertificate.subjectPublicKeyInfo.subjectPublicKey;
}

function hexBytes(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex.length % 2 ? `0${hex}` : hex, "hex"));
}

interface OcspOptions {
  cert: x509.X509Certificate;
  issuer: Issuer;
  status?: "good" | "revoked" | "unknown";
  revokedAt?: Date;
  reason?: number;
  thisUpdate?: Date;
  nextUpdate?: Date;
  hash?: keyof typeof HASH_OIDS | "md5";
  /** The CertID's serial number bytes, in place of the certificate's. */
  serial?: Uint8Array;
  /** The CertID's issuer name hash taken over another name. */
  issuerName?: x509.X509Certificate;
  /** Who signs: the issuer (default) or a responder certificate and its key. */
  signer?: { cert: x509.X509Certificate; privateKey: KeyObject };
  byKey?: boolean;
  /** The certificates the response carries. */
  certs?: x509.X509Certificate[];
  signature?: SigName;
  /** The response status, when not successful. */
  responseStatus?: OCSPResponseStatus;
  responseType?: string;
  /** tbsResponseData encoded with a longer length form than DER's (BER): the signature covers those bytes. */
  berLength?: boolean;
}

function signatureFor(name: SigName, key: KeyObject, data: Uint8Array): Buffer {
  const hash = name === "ed25519" ? null : name.endsWith("sha1") ? "sha1" : `sha${name.slice(-3)}`;
  return sign(hash, data, key);
}

function ocspResponse(o: OcspOptions): Uint8Array {
  if (o.responseStatus !== undefined && o.responseStatus !== OCSPResponseStatus.successful)
    return new Uint8Array(AsnConvert.serialize(new OCSPResponse({ responseStatus: o.responseStatus })));
  const hashName = o.hash ?? "sha1";
  const hashOid = hashName === "md5" ? "1.2.840.113549.2.5" : HASH_OIDS[hashName];
  const h = (b: ArrayBuffer) => createHash(hashName).update(new Uint8Array(b)).digest();
  const certID = new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: hashOid, parameters: null }),
    issuerNameHash: new OctetString(h((o.issuerName ?? o.issuer.parsed).subjectName.toArrayBuffer())),
    issuerKeyHash: new OctetString(h(spkiBits(o.issuer.parsed))),
    serialNumber: (o.serial ?? hexBytes(o.cert.serialNumber)).slice().buffer as ArrayBuffer,
  });
  const status = o.status ?? "good";
  const certStatus =
    status === "good"
      ? new CertStatus({ good: null })
      : status === "unknown"
        ? new CertStatus({ unknown: null })
        : new CertStatus({
            revoked: new RevokedInfo({
              revocationTime: o.revokedAt ?? new Date(Date.now() - MINUTE),
              ...(o.reason !== undefined ? { revocationReason: new CRLReason(o.reason) } : {}),
            }),
          });
  const signerCert = o.signer?.cert ?? o.issuer.parsed;
  const signerKey = o.signer?.privateKey ?? o.issuer.privateKey;
  const responderID = o.byKey
    ? new ResponderID({
        byKey: new OctetString(
          createHash("sha1")
            .update(new Uint8Array(spkiBits(signerCert)))
            .digest(),
        ),
      })
    : new ResponderID({ byName: AsnConvert.parse(signerCert.subjectName.toArrayBuffer(), Name) });
  const tbs = new ResponseData({
    responderID,
    producedAt: new Date(),
    responses: [
      new SingleResponse({
        certID,
        certStatus,
        thisUpdate: o.thisUpdate ?? new Date(Date.now() - MINUTE),
        ...(o.nextUpdate ? { nextUpdate: o.nextUpdate } : {}),
      }),
    ],
  });
  let tbsDer = new Uint8Array(AsnConvert.serialize(tbs));
  if (o.berLength) {
    // Re-encode the outer length with one more octet than needed (BER allows it; DER does not).
    const lengthOctets = tbsDer[1]! & 0x80 ? tbsDer[1]! & 0x7f : 0;
    const content = tbsDer.subarray(2 + lengthOctets);
    const len = content.length;
    tbsDer = Uint8Array.of(0x30, 0x83, (len >> 16) & 0xff, (len >> 8) & 0xff, len & 0xff, ...content);
  }
  const sigName =
    o.signature ?? (signerKey.asymmetricKeyType === "rsa" ? "rsa-sha256" : signerKey.asymmetricKeyType === "ed25519" ? "ed25519" : "ecdsa-sha256");
  const signature = signatureFor(sigName, signerKey, tbsDer);
  const algorithm = new Uint8Array(AsnConvert.serialize(new AlgorithmIdentifier({ algorithm: SIG[sigName] })));
  const bitString = derOf(0x03, Uint8Array.of(0, ...signature));
  const certs = o.certs ? [derOf(0xa0, derOf(0x30, concat(...o.certs.map((c) => new Uint8Array(c.rawData)))))] : [];
  const basic = derOf(0x30, concat(tbsDer, algorithm, bitString, ...certs));
  return new Uint8Array(
    AsnConvert.serialize(
      new OCSPResponse({
        responseStatus: OCSPResponseStatus.successful,
        responseBytes: new ResponseBytes({ responseType: o.responseType ?? id_pkix_ocsp_basic, response: new OctetString(basic) }),
      }),
    ),
  );
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

function derOf(tag: number, content: Uint8Array): Uint8Array {
  const len = content.length;
  const length =
    len < 0x80 ? [len] : len < 0x100 ? [0x81, len] : len < 0x10000 ? [0x82, len >> 8, len & 0xff] : [0x83, len >> 16, (len >> 8) & 0xff, len & 0xff];
  return Uint8Array.of(tag, ...length, ...content);
}

interface CrlOptions {
  issuer: Issuer;
  signedBy?: Issuer;
  issuerName?: string;
  entries?: Array<{ serial: string; reason?: number; invalidity?: Date; at?: Date }>;
  thisUpdate?: Date;
  nextUpdate?: Date;
  delta?: boolean;
}

async function crlOf(o: CrlOptions): Promise<Uint8Array> {
  const signer = o.signedBy ?? o.issuer;
  const crl = await x509.X509CrlGenerator.create({
    issuer: o.issuerName ?? o.issuer.parsed.subject,
    thisUpdate: o.thisUpdate ?? new Date(Date.now() - MINUTE),
    // Always with a nextUpdate: @peculiar/x509 2.2 reads no entries from a CRL without one (see the area's notes).
    nextUpdate: o.nextUpdate ?? new Date(Date.now() + 60 * MINUTE),
    entries: (o.entries ?? []).map((e) => ({
      serialNumber: e.serial,
      revocationDate: e.at ?? new Date(Date.now() - 2 * MINUTE),
      ...(e.reason !== undefined ? { reason: e.reason } : {}),
      ...(e.invalidity ? { invalidity: e.invalidity } : {}),
    })),
    extensions: o.delta ? [new x509.Extension("2.5.29.27", true, Uint8Array.of(0x02, 0x01, 0x01))] : [],
    signingKey: await toWebCrypto(signer.privateKey, signer.cert.keyType, "sign"),
    signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
  });
  return new Uint8Array(crl.rawData);
}

/** A fetcher in memory: each URL answers the bytes given, or fails. */
function fetcher(answers: { ocsp?: Record<string, Uint8Array | Error>; crl?: Record<string, Uint8Array | Error> }): RevocationFetcher & { asked: string[] } {
  const asked: string[] = [];
  const answer = (table: Record<string, Uint8Array | Error> | undefined, url: string) => {
    asked.push(url);
    const a = table?.[url];
    if (a === undefined) return Promise.reject(new Error(`nothing at ${url}`));
    return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
  };
  return { asked, ocsp: (url) => answer(answers.ocsp, url), crl: (url) => answer(answers.crl, url) };
}

let root: TestCertificate;
let ca: Issuer;
let leaf: TestCertificate;
let rsaCa: Issuer;
let edCa: Issuer;
before(async () => {
  root = await createRoot({ subject: "C=US, ST=WA, O=Acme, CN=Acme Root" });
  ca = issuerOf(await issue(root, { subject: "C=US, ST=WA, O=Acme, CN=Acme CA", isCa: true, basicConstraints: { ca: true, pathLength: 0 } }));
  leaf = await issue(ca.cert, { subject: "C=US, ST=WA, O=Acme, CN=Release", ocspUrls: [OCSP_URL], crlUrls: [CRL_URL] });
  rsaCa = issuerOf(await createRoot({ subject: "C=US, ST=WA, O=Acme, CN=RSA CA", keyType: "rsa-2048" }));
  const edKeys = generateKeyPairSync("ed25519");
  const edRoot = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "0e",
    name: "C=US, ST=WA, O=Acme, CN=Ed CA",
    keys: {
      privateKey: await globalThis.crypto.subtle.importKey("pkcs8", edKeys.privateKey.export({ type: "pkcs8", format: "der" }), { name: "Ed25519" }, false, [
        "sign",
      ]),
      publicKey: await globalThis.crypto.subtle.importKey("spki", edKeys.publicKey.export({ type: "spki", format: "der" }), { name: "Ed25519" }, true, [
        "verify",
      ]),
    },
    signingAlgorithm: { name: "Ed25519" },
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
  });
  edCa = {
    cert: { der: new Uint8Array(edRoot.rawData), pem: "", privateKey: edKeys.privateKey, keyType: "ec-p256", cert: edRoot },
    parsed: edRoot,
    privateKey: edKeys.privateKey,
  };
});

const judge = (der: Uint8Array, cert: x509.X509Certificate, issuer: Issuer, now = new Date()) => judgeOcspResponse(der, cert, judgeIssuer(issuer), now);
const unknown = (why: string | RegExp) => (status: unknown) => {
  assert.equal((status as { status: string }).status, "unknown");
  if (typeof why === "string") assert.equal((status as { why: string }).why, why);
  else assert.match((status as { why: string }).why, why);
};

describe("OCSP responses", () => {
  test("a good answer is good, whatever hash its CertID is made with", () => {
    for (const hash of ["sha1", "sha256", "sha384", "sha512"] as const)
      assert.deepEqual(judge(ocspResponse({ cert: leaf.cert, issuer: ca, hash }), leaf.cert, ca), { status: "good" }, hash);
  });
  test("a CertID by a hash that is not SHA-1 or SHA-2 names no certificate", () =>
    unknown("the response does not name the certificate")(judge(ocspResponse({ cert: leaf.cert, issuer: ca, hash: "md5", status: "revoked" }), leaf.cert, ca)));
  test("a CertID with another issuer name, or another serial number, names another certificate", () => {
    unknown("the response does not name the certificate")(
      judge(ocspResponse({ cert: leaf.cert, issuer: ca, issuerName: root.cert, status: "revoked" }), leaf.cert, ca),
    );
    const serial = hexBytes(leaf.cert.serialNumber);
    serial[0] = serial[0]! ^ 0x40;
    unknown("the response does not name the certificate")(judge(ocspResponse({ cert: leaf.cert, issuer: ca, serial, status: "revoked" }), leaf.cert, ca));
  });
  test("a serial number written with a leading zero byte is the same number", () => {
    const serial = Uint8Array.of(0, ...hexBytes(leaf.cert.serialNumber));
    assert.deepEqual(judge(ocspResponse({ cert: leaf.cert, issuer: ca, serial }), leaf.cert, ca), { status: "good" });
  });
  test("an unsuccessful response names its status", () => {
    unknown("the responder answered tryLater")(
      judge(ocspResponse({ cert: leaf.cert, issuer: ca, responseStatus: OCSPResponseStatus.tryLater }), leaf.cert, ca),
    );
    unknown("the responder answered unauthorized")(
      judge(ocspResponse({ cert: leaf.cert, issuer: ca, responseStatus: OCSPResponseStatus.unauthorized }), leaf.cert, ca),
    );
  });
  test("a successful response without a basic response, or of another type", () => {
    const bare = new Uint8Array(AsnConvert.serialize(new OCSPResponse({ responseStatus: OCSPResponseStatus.successful })));
    unknown("the response is not a basic OCSP response")(judge(bare, leaf.cert, ca));
    unknown("the response is not a basic OCSP response")(judge(ocspResponse({ cert: leaf.cert, issuer: ca, responseType: "1.2.3.4" }), leaf.cert, ca));
  });
  test("bytes that are not a response", () => unknown(/^the response cannot be read: /)(judge(Uint8Array.of(0x30, 0x03, 0x02, 0x01), leaf.cert, ca)));
  test("a response the issuer signed over BER-encoded data verifies over the bytes as received", () =>
    assert.deepEqual(judge(ocspResponse({ cert: leaf.cert, issuer: ca, berLength: true }), leaf.cert, ca), { status: "good" }));
  test("a responder identified by the hash of the issuer's key is the issuer", () =>
    assert.deepEqual(judge(ocspResponse({ cert: leaf.cert, issuer: ca, byKey: true }), leaf.cert, ca), { status: "good" }));
  test("every signature algorithm a responder may use", () => {
    const rsaLeaf = leafOf(rsaCa);
    const edLeaf = leafOf(edCa);
    return Promise.all([rsaLeaf, edLeaf]).then(([r, e]) => {
      for (const s of ["rsa-sha256", "rsa-sha384", "rsa-sha512"] as const)
        assert.deepEqual(judge(ocspResponse({ cert: r.cert, issuer: rsaCa, signature: s }), r.cert, rsaCa), { status: "good" }, s);
      for (const s of ["ecdsa-sha256", "ecdsa-sha384", "ecdsa-sha512"] as const)
        assert.deepEqual(judge(ocspResponse({ cert: leaf.cert, issuer: ca, signature: s }), leaf.cert, ca), { status: "good" }, s);
      assert.deepEqual(judge(ocspResponse({ cert: e.cert, issuer: edCa }), e.cert, edCa), { status: "good" });
      // SHA-1 with RSA is not among them; nor is ECDSA with an Ed25519 key.
      unknown(/signature does not verify with the issuer's key/)(judge(ocspResponse({ cert: r.cert, issuer: rsaCa, signature: "rsa-sha1" }), r.cert, rsaCa));
      const wrong = ocspResponse({ cert: e.cert, issuer: edCa });
      unknown(/signature does not verify/)(judge(relabel(wrong, SIG.ed25519, SIG["ecdsa-sha256"]), e.cert, edCa));
    });
  });
  test("the times of an answer, at the edges of the allowed clock skew", () => {
    const now = new Date();
    const at = (d: number) => new Date(Math.floor((now.getTime() + d) / 1000) * 1000);
    const t = at(0);
    const good = (o: Partial<OcspOptions>, when: Date) => judge(ocspResponse({ cert: leaf.cert, issuer: ca, ...o }), leaf.cert, ca, when);
    // thisUpdate up to the skew ahead of now, nextUpdate up to the skew behind it.
    assert.deepEqual(good({ thisUpdate: t }, new Date(t.getTime() - SKEW)), { status: "good" });
    unknown(`the response is from the future (${t.toISOString()})`)(good({ thisUpdate: t }, new Date(t.getTime() - SKEW - 1000)));
    assert.deepEqual(good({ thisUpdate: at(-MINUTE), nextUpdate: t }, new Date(t.getTime() + SKEW)), { status: "good" });
    assert.deepEqual(good({ thisUpdate: at(-MINUTE), nextUpdate: t }, t), { status: "good" });
    unknown(/out of date/)(good({ thisUpdate: at(-MINUTE), nextUpdate: t }, new Date(t.getTime() + SKEW + 1000)));
  });
  test("a revoked answer without a reason, and each reason by its name", () => {
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 10 * MINUTE);
    assert.deepEqual(judge(ocspResponse({ cert: leaf.cert, issuer: ca, status: "revoked", revokedAt: at }), leaf.cert, ca), {
      status: "revoked",
      at,
      source: "",
    });
    const names = [
      "unspecified",
      "keyCompromise",
      "cACompromise",
      "affiliationChanged",
      "superseded",
      "cessationOfOperation",
      "certificateHold",
      "code 7",
      "removeFromCRL",
      "privilegeWithdrawn",
      "aACompromise",
    ];
    names.forEach((name, reason) => {
      const status = judge(ocspResponse({ cert: leaf.cert, issuer: ca, status: "revoked", revokedAt: at, reason }), leaf.cert, ca);
      assert.deepEqual(status, { status: "revoked", at, source: "", reason: name }, name);
    });
  });
});

/** The response with its signature algorithm OID's bytes replaced (the signature left as it was). */
function relabel(der: Uint8Array, from: string, to: string): Uint8Array {
  const f = Buffer.from(AsnConvert.serialize(new AlgorithmIdentifier({ algorithm: from })));
  const t = Buffer.from(AsnConvert.serialize(new AlgorithmIdentifier({ algorithm: to })));
  const response = AsnConvert.parse(der, OCSPResponse);
  const basic = Buffer.from(response.responseBytes!.response.buffer);
  const i = basic.indexOf(f);
  const replaced = Buffer.concat([basic.subarray(0, i), t, basic.subarray(i + f.length)]);
  // The basic response's own length changes with the OID's: rebuild it around its contents.
  response.responseBytes!.response = new OctetString(fixLength(replaced));
  return new Uint8Array(AsnConvert.serialize(response));
}

function fixLength(seq: Buffer): Uint8Array {
  const lengthOctets = seq[1]! & 0x80 ? seq[1]! & 0x7f : 0;
  return derOf(0x30, seq.subarray(2 + lengthOctets));
}

async function leafOf(issuer: Issuer): Promise<TestCertificate> {
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomBytes(8)
      .toString("hex")
      .replace(/^[89a-f]/, "1"),
    subject: "C=US, ST=WA, O=Acme, CN=Leaf of " + issuer.parsed.subject,
    issuer: issuer.parsed.subjectName,
    publicKey: await globalThis.crypto.subtle.importKey(
      "spki",
      generateKeyPairSync("ec", { namedCurve: "prime256v1" }).publicKey.export({ type: "spki", format: "der" }),
      { name: "ECDSA", namedCurve: "P-256" },
      true,
      ["verify"],
    ),
    signingKey:
      issuer === edCa
        ? await globalThis.crypto.subtle.importKey("pkcs8", issuer.privateKey.export({ type: "pkcs8", format: "der" }), { name: "Ed25519" }, false, ["sign"])
        : await toWebCrypto(issuer.privateKey, issuer.cert.keyType, "sign"),
    signingAlgorithm:
      issuer === edCa
        ? { name: "Ed25519" }
        : issuer.cert.keyType.startsWith("rsa")
          ? ({ name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as Algorithm)
          : ({ name: "ECDSA", hash: "SHA-256" } as EcdsaParams),
  });
  return { der: new Uint8Array(cert.rawData), pem: "", privateKey: issuer.privateKey, keyType: "ec-p256", cert };
}

describe("delegated responders", () => {
  let responder: TestCertificate;
  before(async () => {
    responder = await issue(ca.cert, {
      subject: "C=US, ST=WA, O=Acme, CN=Acme OCSP",
      extendedKeyUsage: { usages: [OCSP_SIGNING] },
      notBefore: new Date(Math.floor(Date.now() / 1000) * 1000 - 60 * MINUTE),
      notAfter: new Date(Math.floor(Date.now() / 1000) * 1000 + 60 * MINUTE),
    });
  });
  const by = (r: TestCertificate, o: Partial<OcspOptions> = {}) =>
    ocspResponse({ cert: leaf.cert, issuer: ca, signer: { cert: r.cert, privateKey: r.privateKey }, certs: [r.cert], ...o });

  test("one the issuer issued for OCSP signing is believed, by name or by key, among other certificates", () => {
    assert.deepEqual(judge(by(responder), leaf.cert, ca), { status: "good" });
    assert.deepEqual(judge(by(responder, { byKey: true }), leaf.cert, ca), { status: "good" });
    assert.deepEqual(judge(by(responder, { certs: [root.cert, responder.cert] }), leaf.cert, ca), { status: "good" });
  });
  test("a response signed by a responder it does not carry", () =>
    unknown("the response is signed by neither the issuer nor a responder certificate it carries")(judge(by(responder, { certs: [] }), leaf.cert, ca)));
  test("a responder with another issuer name, or signed by another key, is not the issuer's", async () => {
    const other = issuerOf(await createRoot({ subject: "C=US, ST=WA, O=Acme, CN=Acme CA" }));
    const sameName = await issue(other.cert, { subject: "C=US, ST=WA, O=Acme, CN=Acme OCSP", extendedKeyUsage: { usages: [OCSP_SIGNING] } });
    unknown("the responder C=US, ST=WA, O=Acme, CN=Acme OCSP is not issued by the certificate's issuer")(judge(by(sameName), leaf.cert, ca));
    const keys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    const otherName = await x509.X509CertificateGenerator.create({
      serialNumber: "0a77",
      subject: "C=US, ST=WA, O=Acme, CN=Acme OCSP",
      issuer: "C=US, ST=WA, O=Elsewhere, CN=Not the CA",
      publicKey: await globalThis.crypto.subtle.importKey(
        "spki",
        keys.publicKey.export({ type: "spki", format: "der" }),
        { name: "ECDSA", namedCurve: "P-256" },
        true,
        ["verify"],
      ),
      signingKey: await toWebCrypto(ca.privateKey, ca.cert.keyType, "sign"),
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
      extensions: [new x509.ExtendedKeyUsageExtension([OCSP_SIGNING])],
    });
    unknown(/is not issued by the certificate's issuer/)(judge(by({ ...responder, cert: otherName, privateKey: keys.privateKey }), leaf.cert, ca));
  });
  test("a responder without the OCSP-signing usage, or without any extended key usage", async () => {
    for (const extendedKeyUsage of [{ usages: [TIME_STAMPING] }, "absent" as const]) {
      const r = await issue(ca.cert, { subject: "C=US, ST=WA, O=Acme, CN=Acme OCSP", extendedKeyUsage });
      unknown("the responder C=US, ST=WA, O=Acme, CN=Acme OCSP is not authorised to sign OCSP responses (no OCSPSigning usage)")(judge(by(r), leaf.cert, ca));
    }
  });
  test("a responder is valid within the allowed clock skew of its validity, and not past it", () => {
    const from = responder.cert.notBefore.getTime();
    const to = responder.cert.notAfter.getTime();
    const good = (when: number) =>
      assert.deepEqual(judge(by(responder, { thisUpdate: new Date(when - SKEW) }), leaf.cert, ca, new Date(when)), { status: "good" });
    const invalid = (when: number) =>
      unknown("the responder C=US, ST=WA, O=Acme, CN=Acme OCSP is not valid now")(
        judge(by(responder, { thisUpdate: new Date(when - SKEW) }), leaf.cert, ca, new Date(when)),
      );
    good(from - SKEW);
    good(from);
    invalid(from - SKEW - 1000);
    good(to + SKEW);
    good(to);
    invalid(to + SKEW + 1000);
  });
  test("a signature that does not verify names the responder", () => {
    const forged = ocspResponse({ cert: leaf.cert, issuer: ca, signer: { cert: responder.cert, privateKey: ca.privateKey }, certs: [responder.cert] });
    unknown("the response's signature does not verify with the responder C=US, ST=WA, O=Acme, CN=Acme OCSP's key")(judge(forged, leaf.cert, ca));
  });
});

describe("CRLs", () => {
  const judgeC = async (o: CrlOptions, now = new Date(), cert = leaf.cert) => judgeCrl(await crlOf(o), cert, judgeIssuer(ca), now);
  test("an entry of the certificate revokes it, with or without a reason; removeFromCRL does not", async () => {
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 10 * MINUTE);
    assert.deepEqual(await judgeC({ issuer: ca, entries: [{ serial: leaf.cert.serialNumber, at }] }), { status: "revoked", at, source: "" });
    assert.deepEqual(await judgeC({ issuer: ca, entries: [{ serial: leaf.cert.serialNumber, at, reason: 1 }] }), {
      status: "revoked",
      at,
      source: "",
      reason: "keyCompromise",
    });
    assert.deepEqual(await judgeC({ issuer: ca, entries: [{ serial: leaf.cert.serialNumber, at, reason: 8 }] }), { status: "good" });
    assert.deepEqual(await judgeC({ issuer: ca, entries: [] }), { status: "good" });
  });
  test("bytes that are not a CRL", async () =>
    unknown(/^the CRL cannot be read: /)(await judgeCrl(Uint8Array.of(0x30, 0x03, 0x02, 0x01, 0x01), leaf.cert, judgeIssuer(ca), new Date())));
  test("a CRL of another issuer name is named so, before its signature is checked", async () =>
    unknown("the CRL is issued by C=US, ST=WA, O=Acme, CN=Acme Root, not by the certificate's issuer")(
      await judgeC({ issuer: ca, issuerName: "C=US, ST=WA, O=Acme, CN=Acme Root", entries: [{ serial: leaf.cert.serialNumber }] }),
    ));
  test("a delta CRL is not a complete one", async () =>
    unknown("it is a delta CRL, not a complete one")(await judgeC({ issuer: ca, delta: true, entries: [{ serial: leaf.cert.serialNumber }] })));
  test("the times of a CRL, at the edges of the allowed clock skew", async () => {
    const t = new Date(Math.floor(Date.now() / 1000) * 1000);
    assert.deepEqual(await judgeC({ issuer: ca, thisUpdate: t }, new Date(t.getTime() - SKEW)), { status: "good" });
    unknown(`the CRL is from the future (${t.toISOString()})`)(await judgeC({ issuer: ca, thisUpdate: t }, new Date(t.getTime() - SKEW - 1000)));
    const earlier = new Date(t.getTime() - 10 * MINUTE);
    assert.deepEqual(await judgeC({ issuer: ca, thisUpdate: earlier, nextUpdate: t }, new Date(t.getTime() + SKEW)), { status: "good" });
    assert.deepEqual(await judgeC({ issuer: ca, thisUpdate: earlier, nextUpdate: t }, t), { status: "good" });
    unknown(/out of date/)(await judgeC({ issuer: ca, thisUpdate: earlier, nextUpdate: t }, new Date(t.getTime() + SKEW + 1000)));
  });
});

describe("the URLs a certificate names", () => {
  test("only HTTP(S) URLs, at most three of each", async () => {
    const cert = await issue(ca.cert, {
      subject: "C=US, ST=WA, O=Acme, CN=Many",
      ocspUrls: ["ldap://directory.example/http://ocsp.example/", "http://o1/", "https://o2/", "HTTP://o3/", "http://o4/"],
      crlUrls: ["ldap://directory.example/cn=CA?certificateRevocationList", "http://c1/", "http://c2/", "http://c3/", "http://c4/"],
    });
    const urls = revocationUrls(cert.cert);
    assert.deepEqual(
      { ocsp: [...urls.ocsp], crl: [...urls.crl] },
      { ocsp: ["http://o1/", "https://o2/", "HTTP://o3/"], crl: ["http://c1/", "http://c2/", "http://c3/"] },
    );
  });
  test("a distribution point that names only its CRL issuer names no URL", async () => {
    const point = new DistributionPoint({ cRLIssuer: [new GeneralName({ uniformResourceIdentifier: "http://crl-issuer.example/" })] });
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: "0b0b",
      subject: "C=US, ST=WA, O=Acme, CN=Point",
      issuer: ca.parsed.subjectName,
      publicKey: leaf.cert.publicKey,
      signingKey: await toWebCrypto(ca.privateKey, ca.cert.keyType, "sign"),
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
      extensions: [new x509.CRLDistributionPointsExtension([point])],
    });
    const urls = revocationUrls(cert);
    assert.deepEqual({ ocsp: [...urls.ocsp], crl: [...urls.crl] }, { ocsp: [], crl: [] });
  });
});

describe("a chain's status", () => {
  test("a revocation at the signing authority's authentic signing time itself counts", async () => {
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 10 * MINUTE);
    const f = fetcher({ ocsp: { [OCSP_URL]: ocspResponse({ cert: leaf.cert, issuer: ca, status: "revoked", revokedAt: at }) } });
    const status = await checkChainRevocation(readChain([leaf.der, ca.cert.der, root.der]), f, new Date(), at);
    assert.deepEqual(status, {
      status: "revoked",
      reason: `certificate 0 (C=US, ST=WA, O=Acme, CN=Release) is revoked since ${at.toISOString()} (OCSP ${OCSP_URL})`,
    });
  });
  test("every certificate whose status is unknown is named, one after the other", async () => {
    const caWithUrls = issuerOf(
      await issue(root, {
        subject: "C=US, ST=WA, O=Acme, CN=Acme CA 2",
        isCa: true,
        basicConstraints: { ca: true, pathLength: 0 },
        crlUrls: ["http://root.test/root.crl"],
      }),
    );
    const leaf2 = await issue(caWithUrls.cert, { subject: "C=US, ST=WA, O=Acme, CN=Release 2", crlUrls: [CRL_URL] });
    const status = await checkChainRevocation(readChain([leaf2.der, caWithUrls.cert.der, root.der]), fetcher({}), new Date());
    assert.deepEqual(status, {
      status: "unknown",
      reason:
        `the revocation status of certificate 0 (C=US, ST=WA, O=Acme, CN=Release 2) could not be told: CRL ${CRL_URL}: nothing at ${CRL_URL}; ` +
        "the revocation status of certificate 1 (C=US, ST=WA, O=Acme, CN=Acme CA 2) could not be told: CRL http://root.test/root.crl: nothing at http://root.test/root.crl",
    });
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Whole signatures (notation-verification.ts).

const MANIFEST = { digest: "sha256:" + "cd".repeat(32), mediaType: "application/vnd.oci.image.manifest.v1+json", size: 321 };
const PAYLOAD = notationPayload(MANIFEST);
const JWS = "application/jose+json";

function trust(o: Partial<NotationTrust> = {}): NotationTrust {
  return {
    ca: [root.der],
    signingAuthority: [root.der],
    tsa: [],
    storeName: "the entry's certs",
    identities: "*",
    level: "strict",
    verifyTimestamp: "always",
    ...o,
  };
}
const chainOfLeaf = () => [leaf.der, ca.cert.der, root.der];
const identity = (text: string) => {
  const parsed = parseTrustedIdentity(text);
  if ("error" in parsed) throw new Error(parsed.error);
  return parsed.identity;
};

describe("a signature's outcome", () => {
  test("the identity matched is given: * for any, else as a policy writes it", async () => {
    const bytes = signJwsEnvelope({ payload: PAYLOAD, signer: leaf, chain: chainOfLeaf() });
    const any = await verifyNotationSignature(bytes, JWS, MANIFEST, trust());
    assert.ok(any.ok);
    assert.equal(any.identity, "*");
    const named = await verifyNotationSignature(bytes, JWS, MANIFEST, trust({ identities: [identity("x509.subject: C=US, ST=WA, O=Acme, CN=Release")] }));
    assert.ok(named.ok);
    assert.equal(named.identity, "x509.subject: C=US, ST=WA, O=Acme, CN=Release");
  });
  test("a leaf that matches no identity is refused with the reason", async () => {
    const bytes = signJwsEnvelope({ payload: PAYLOAD, signer: leaf, chain: chainOfLeaf() });
    const outcome = await verifyNotationSignature(bytes, JWS, MANIFEST, trust({ identities: [identity("x509.subject: C=US, ST=WA, O=Other")] }));
    assert.deepEqual(outcome, { ok: false, reason: "the signing certificate's subject C=US, ST=WA, O=Acme, CN=Release is none of the trusted identities" });
  });
  test("a signature is expired from the instant of its expiry", async () => {
    const expiry = new Date(Math.floor(Date.now() / 1000) * 1000 + MINUTE);
    const bytes = signJwsEnvelope({ payload: PAYLOAD, signer: leaf, chain: chainOfLeaf(), signingTime: new Date(expiry.getTime() - 2 * MINUTE), expiry });
    assert.equal((await verifyNotationSignature(bytes, JWS, MANIFEST, trust(), new Date(expiry.getTime() - 1000))).ok, true);
    assert.deepEqual(await verifyNotationSignature(bytes, JWS, MANIFEST, trust(), expiry), {
      ok: false,
      reason: `the signature expired at ${expiry.toISOString()}`,
    });
  });
  test("an error that is not a verification refusal is given as one that could not be verified", async () => {
    // An intermediate whose key Node cannot decode: reading it fails with node:crypto's own error.
    const { AsnConvert: A } = await import("@peculiar/asn1-schema");
    const { SubjectPublicKeyInfo } = await import("@peculiar/asn1-x509");
    const info = A.parse(ca.cert.cert.publicKey.rawData, SubjectPublicKeyInfo);
    info.algorithm.algorithm = "1.2.3.4.5";
    info.algorithm.parameters = null;
    const bogus = await x509.X509CertificateGenerator.create({
      serialNumber: "0c0c",
      subject: ca.parsed.subjectName,
      issuer: root.cert.subjectName,
      publicKey: new x509.PublicKey(new Uint8Array(A.serialize(info))),
      signingKey: await toWebCrypto(root.privateKey, root.keyType, "sign"),
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
      extensions: [new x509.BasicConstraintsExtension(true, 0, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
    });
    const bytes = signJwsEnvelope({ payload: PAYLOAD, signer: leaf, chain: [leaf.der, new Uint8Array(bogus.rawData), root.der] });
    const outcome = await verifyNotationSignature(bytes, JWS, MANIFEST, trust());
    assert.equal(outcome.ok, false);
    assert.match((outcome as { reason: string }).reason, /^cannot verify: error:[0-9A-F]+:/);
  });
});

describe("revocation in a signature's outcome", () => {
  test("enforce admits a signer every source answers good for, and refuses when no checker is configured", async () => {
    const bytes = signJwsEnvelope({ payload: PAYLOAD, signer: leaf, chain: chainOfLeaf() });
    const f = fetcher({ ocsp: { [OCSP_URL]: ocspResponse({ cert: leaf.cert, issuer: ca }) } });
    const outcome = await verifyNotationSignature(bytes, JWS, MANIFEST, trust({ revocation: "enforce" }), new Date(), f);
    assert.equal(outcome.ok, true, JSON.stringify(outcome));
    assert.deepEqual(await verifyNotationSignature(bytes, JWS, MANIFEST, trust({ revocation: "enforce" })), {
      ok: false,
      reason: "no revocation checker is configured here",
    });
  });
  test("a signing authority's signature stays valid after a later revocation; a notary.x509 signature does not, even timestamped", async () => {
    const signedAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 20 * MINUTE);
    const revokedAt = new Date(signedAt.getTime() + 10 * MINUTE);
    const f = fetcher({ ocsp: { [OCSP_URL]: ocspResponse({ cert: leaf.cert, issuer: ca, status: "revoked", revokedAt }) } });
    const authority = signJwsEnvelope({
      payload: PAYLOAD,
      signer: leaf,
      chain: chainOfLeaf(),
      scheme: "notary.x509.signingAuthority",
      authenticSigningTime: signedAt,
    });
    const admitted = await verifyNotationSignature(authority, JWS, MANIFEST, trust({ revocation: "enforce" }), new Date(), f);
    assert.equal(admitted.ok, true, JSON.stringify(admitted));

    const tsa = await createTestTsa();
    const unsigned = signJwsEnvelope({ payload: PAYLOAD, signer: leaf, chain: chainOfLeaf(), signingTime: signedAt });
    const signature = Buffer.from(JSON.parse(new TextDecoder().decode(unsigned)).signature, "base64url");
    const token = await tsa.timestamp(signature, { genTime: signedAt });
    const stamped = JSON.parse(new TextDecoder().decode(unsigned));
    stamped.header["io.cncf.notary.timestampSignature"] = Buffer.from(token).toString("base64");
    const refused = await verifyNotationSignature(
      new TextEncoder().encode(JSON.stringify(stamped)),
      JWS,
      MANIFEST,
      trust({ revocation: "enforce", tsa: [tsa.root.der] }),
      new Date(),
      f,
    );
    assert.equal(refused.ok, false);
    assert.match((refused as { reason: string }).reason, /^certificate 0 \(C=US, ST=WA, O=Acme, CN=Release\) is revoked since /);
  });
});

describe("timestamps verified only after a certificate expired", () => {
  let expiring: TestCertificate;
  let tsa: Awaited<ReturnType<typeof createTestTsa>>;
  before(async () => {
    const t = Math.floor(Date.now() / 1000) * 1000;
    expiring = await issue(ca.cert, { subject: "C=US, ST=WA, O=Acme, CN=Short", notBefore: new Date(t - 60 * MINUTE), notAfter: new Date(t + 60 * MINUTE) });
    tsa = await createTestTsa();
  });
  const envelope = async (stampAt?: Date) => {
    const signingTime = new Date(expiring.cert.notBefore.getTime() + MINUTE);
    const unsigned = signJwsEnvelope({ payload: PAYLOAD, signer: expiring, chain: [expiring.der, ca.cert.der, root.der], signingTime });
    if (!stampAt) return unsigned;
    const jws = JSON.parse(new TextDecoder().decode(unsigned));
    const token = await tsa.timestamp(Buffer.from(jws.signature, "base64url"), { genTime: stampAt });
    jws.header["io.cncf.notary.timestampSignature"] = Buffer.from(token).toString("base64");
    return new TextEncoder().encode(JSON.stringify(jws));
  };
  const entry = () => trust({ tsa: [tsa.root.der], verifyTimestamp: "afterCertExpiry" });

  test("while every certificate is valid (to its last instant), no timestamp is needed", async () => {
    const bytes = await envelope();
    assert.equal((await verifyNotationSignature(bytes, JWS, MANIFEST, entry(), new Date())).ok, true);
    assert.equal((await verifyNotationSignature(bytes, JWS, MANIFEST, entry(), expiring.cert.notAfter)).ok, true);
  });
  test("once the leaf expired, a timestamp from its validity keeps the signature valid", async () => {
    const bytes = await envelope(new Date(Math.floor(Date.now() / 1000) * 1000 - MINUTE));
    const later = new Date(expiring.cert.notAfter.getTime() + MINUTE);
    const outcome = await verifyNotationSignature(bytes, JWS, MANIFEST, entry(), later);
    assert.equal(outcome.ok, true, JSON.stringify(outcome));
  });
  test("once the leaf expired, a signature without a timestamp is refused with the reason", async () => {
    const later = new Date(expiring.cert.notAfter.getTime() + MINUTE);
    assert.deepEqual(await verifyNotationSignature(await envelope(), JWS, MANIFEST, entry(), later), {
      ok: false,
      reason: "the signature has no RFC 3161 timestamp, and the entry verifies timestamps (tsaCerts)",
    });
  });
  test("a timestamp by a TSA the entry does not trust names the entry's tsa store", async () => {
    const other = await createTestTsa({ rootSubject: "C=US, ST=WA, O=Other TSA, CN=Other TSA Root" });
    const outcome = await verifyNotationSignature(
      await envelope(new Date(Math.floor(Date.now() / 1000) * 1000 - MINUTE)),
      JWS,
      MANIFEST,
      trust({ tsa: [other.root.der], verifyTimestamp: "always" }),
    );
    assert.equal(outcome.ok, false);
    assert.match((outcome as { reason: string }).reason, /^no certificate of the chain is in the entry's certs \(tsa\): /);
  });
});
