// A time-stamping authority for tests: RFC 3161 time-stamp tokens (a CMS SignedData over a TSTInfo, RFC 5652 and
// RFC 3161 section 2.4.2) over the bytes a test gives, signed by a TSA leaf under its own root, with knobs that break
// one rule at a time. Tokens are written with pkijs, not with the @peculiar/asn1-cms and asn1-tsp reader the code
// under test uses, so that a misreading of the structures on one side is not mirrored on the other.
import { createHash, randomBytes, type KeyObject } from "node:crypto";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { createRoot, issue, TIME_STAMPING, type CertificateOptions, type TestCertificate, type TestKeyType } from "./test-pki.ts";

// pkijs picks globalThis.crypto on load; say so explicitly, so that no other engine set elsewhere is used.
pkijs.setEngine("node", new pkijs.CryptoEngine({ name: "node", crypto: globalThis.crypto }));

export type TimestampHash = "sha256" | "sha384" | "sha512";

export interface TimestampOptions {
  /** The message imprint's hash, also the signer's digest algorithm. Default sha256. */
  hash?: TimestampHash;
  /** Default: now. */
  genTime?: Date;
  /** TSTInfo accuracy; absent by default. */
  accuracy?: { seconds?: number; millis?: number; micros?: number };
  /** TSTInfo policy OID. Default TEST_TSA_POLICY. */
  policy?: string;
  /** Whether the token carries the TSA leaf and root. Default true. */
  includeCertificates?: boolean;
  /** How the signer info names the TSA's certificate. Default issuerAndSerial. */
  sid?: "issuerAndSerial" | "subjectKeyIdentifier";
  /** Tamper: time-stamp these bytes instead of the ones given. */
  imprintOf?: Uint8Array;
  /** Tamper: flip a bit of the TSA's signature. */
  corruptSignature?: boolean;
  /** Tamper: leave the content-type attribute out of the signed attributes. */
  omitContentTypeAttribute?: boolean;
  /** Tamper: a message-digest attribute that is not the TSTInfo's digest. */
  wrongMessageDigest?: boolean;
  /**
   * The ESS signing-certificate attributes to sign, in order: [] for none. Default one signingCertificateV2 naming the
   * TSA leaf by its SHA-256 hash, issuer and serial number.
   */
  signingCertificate?: SigningCertificateAttribute[];
  /**
   * Encode the TSTInfo's OCTET STRING in BER's constructed form, in `berChunk`-byte pieces (as pkijs does on its own):
   * CMS allows BER outside the signed attributes. Default: DER's primitive form.
   */
  berContent?: boolean;
  berChunk?: number;
  /** With berContent: the pieces after the first wrapped in one more constructed OCTET STRING, as BER also allows. */
  berNested?: boolean;
}

/** An ESS signing-certificate attribute with one ESSCertID(v2). */
export interface SigningCertificateAttribute {
  /** signingCertificateV2 (RFC 5035) or the v1 signingCertificate (RFC 2634), whose certHash is SHA-1. */
  version: 1 | 2;
  /** v2's hashAlgorithm, written out; default SHA-256, left to the DEFAULT. */
  hash?: TimestampHash;
  /** Tamper: the certHash is of this certificate's DER instead of the TSA leaf's. */
  hashOf?: Uint8Array;
  /** Tamper: the issuerSerial names this certificate's issuer and serial number instead of the leaf's; null: none. */
  issuerSerialOf?: Uint8Array | null;
}

export interface TestTsaOptions {
  /** The TSA leaf's key. Default ec-p256. */
  keyType?: TestKeyType;
  /** The root's key. Default: the leaf's. */
  rootKeyType?: TestKeyType;
  rootSubject?: string;
  leafSubject?: string;
  /** When the root and the leaf become valid (default an hour ago): earlier, to time-stamp in the past. */
  notBefore?: Date;
  /** Overrides of the TSA leaf's profile (extendedKeyUsage, keyUsage, validity...). */
  leaf?: Partial<CertificateOptions>;
}

export interface TestTsa {
  root: TestCertificate;
  /** The TSA's certificate, issued by `root`, with a subjectKeyIdentifier extension. */
  leaf: TestCertificate;
  /** The DER TimeStampToken (a ContentInfo, not a TimeStampResp) over hash(bytes). */
  timestamp(bytes: Uint8Array, opts?: TimestampOptions): Promise<Uint8Array>;
}

/** An arbitrary policy OID under the documentation arc of 2.999 (RFC 3161 leaves policies to the TSA). */
export const TEST_TSA_POLICY = "2.999.3161.1";
/** ETSI EN 319 422's baseline time-stamp policy. */
export const ETSI_BASELINE_POLICY = "0.4.0.2023.1.1";

const OID = {
  signedData: "1.2.840.113549.1.7.2",
  tstInfo: "1.2.840.113549.1.9.16.1.4",
  contentType: "1.2.840.113549.1.9.3",
  messageDigest: "1.2.840.113549.1.9.4",
  signingCertificateV2: "1.2.840.113549.1.9.16.2.47",
  signingCertificate: "1.2.840.113549.1.9.16.2.12",
  subjectKeyIdentifier: "2.5.29.14",
  sha256: "2.16.840.1.101.3.4.2.1",
  sha384: "2.16.840.1.101.3.4.2.2",
  sha512: "2.16.840.1.101.3.4.2.3",
} as const;

const WEB_HASH: Record<TimestampHash, string> = { sha256: "SHA-256", sha384: "SHA-384", sha512: "SHA-512" };

/** A root and a TSA leaf (extendedKeyUsage id-kp-timeStamping alone and critical, keyUsage digitalSignature). */
export async function createTestTsa(opts: TestTsaOptions = {}): Promise<TestTsa> {
  const keyType = opts.keyType ?? "ec-p256";
  const root = await createRoot({
    subject: opts.rootSubject ?? "C=US, ST=WA, O=Example TSA, CN=Example TSA Root",
    keyType: opts.rootKeyType ?? keyType,
    ...(opts.notBefore ? { notBefore: opts.notBefore } : {}),
  });
  const issued = await issue(root, {
    subject: opts.leafSubject ?? "C=US, ST=WA, O=Example TSA, CN=Example Time Stamping Authority",
    keyType,
    extendedKeyUsage: { usages: [TIME_STAMPING], critical: true },
    keyUsage: { flags: x509.KeyUsageFlags.digitalSignature, critical: true },
    ...(opts.notBefore ? { notBefore: opts.notBefore } : {}),
    ...opts.leaf,
  });
  const leaf = await withSubjectKeyIdentifier(issued, root);
  return { root, leaf, timestamp: (bytes, options = {}) => timestamp(root, leaf, bytes, options) };
}

/**
 * test-pki.ts writes no subjectKeyIdentifier, which a signer info naming its certificate by key identifier needs: the
 * leaf is signed again by the root with one added (RFC 5280 section 4.2.1.2, method 1: SHA-1 of the public key).
 */
async function withSubjectKeyIdentifier(cert: TestCertificate, issuer: TestCertificate): Promise<TestCertificate> {
  const parsed = certificateOf(cert.der);
  const publicKey = parsed.subjectPublicKeyInfo.subjectPublicKey.valueBlock.valueHexView;
  const keyId = createHash("sha1").update(publicKey).digest();
  parsed.extensions = [
    ...(parsed.extensions ?? []).filter((e) => e.extnID !== OID.subjectKeyIdentifier),
    new pkijs.Extension({ extnID: OID.subjectKeyIdentifier, critical: false, extnValue: new asn1js.OctetString({ valueHex: keyId }).toBER() }),
  ];
  const rsa = issuer.keyType.startsWith("rsa-");
  const hash = rsa || issuer.keyType === "ec-p256" ? "SHA-256" : issuer.keyType === "ec-p384" ? "SHA-384" : "SHA-512";
  await parsed.sign(await signingKey(issuer.privateKey, issuer.keyType, hash), hash);
  const der = new Uint8Array(parsed.toSchema().toBER());
  const reread = new x509.X509Certificate(der);
  return { ...cert, der, pem: reread.toString("pem") + "\n", cert: reread };
}

/** The key as WebCrypto signs with it: RSASSA-PKCS1-v1_5 with `hash`, or ECDSA on the key's curve. */
async function signingKey(key: KeyObject, keyType: TestKeyType, hash: string): Promise<CryptoKey> {
  const params = keyType.startsWith("rsa-")
    ? { name: "RSASSA-PKCS1-v1_5", hash }
    : { name: "ECDSA", namedCurve: keyType === "ec-p256" ? "P-256" : keyType === "ec-p384" ? "P-384" : "P-521" };
  return globalThis.crypto.subtle.importKey("pkcs8", key.export({ type: "pkcs8", format: "der" }), params, false, ["sign"]);
}

function certificateOf(der: Uint8Array): pkijs.Certificate {
  return pkijs.Certificate.fromBER(Uint8Array.from(der));
}

function attribute(type: string, value: asn1js.AsnType): pkijs.Attribute {
  return new pkijs.Attribute({ type, values: [value] });
}

/**
 * ESS signingCertificateV2 (RFC 5035) or signingCertificate (RFC 2634): SigningCertificate(V2) ::= SEQUENCE { certs
 * SEQUENCE OF ESSCertID(v2) }, the one ESSCertIDv2 with its hashAlgorithm left at its DEFAULT (SHA-256) unless another
 * is asked for (ESSCertID has none: SHA-1), the certificate's hash, and its issuer and serial number.
 */
function signingCertificateAttribute(spec: SigningCertificateAttribute, leafDer: Uint8Array): pkijs.Attribute {
  const hash = spec.version === 1 ? "sha1" : (spec.hash ?? "sha256");
  const issuerSerialOf = spec.issuerSerialOf === undefined ? leafDer : spec.issuerSerialOf;
  const named = issuerSerialOf && certificateOf(issuerSerialOf);
  const issuerSerial = named
    ? [
        new asn1js.Sequence({
          value: [new pkijs.GeneralNames({ names: [new pkijs.GeneralName({ type: 4, value: named.issuer })] }).toSchema(), named.serialNumber],
        }),
      ]
    : [];
  const hashAlgorithm = spec.version === 2 && spec.hash ? [new pkijs.AlgorithmIdentifier({ algorithmId: OID[spec.hash] }).toSchema()] : [];
  const certHash = new asn1js.OctetString({
    valueHex: createHash(hash)
      .update(spec.hashOf ?? leafDer)
      .digest(),
  });
  const certId = new asn1js.Sequence({ value: [...hashAlgorithm, certHash, ...issuerSerial] });
  const value = new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [certId] })] });
  return attribute(spec.version === 2 ? OID.signingCertificateV2 : OID.signingCertificate, value);
}

/**
 * An OCTET STRING in BER's constructed form: primitive OCTET STRINGs of `chunk` bytes, concatenated; when `nested`,
 * all but the first in a constructed OCTET STRING of their own.
 */
function constructedOctetString(bytes: Uint8Array, chunk: number, nested = false): asn1js.OctetString {
  const pieces: asn1js.OctetString[] = [];
  for (let i = 0; i < bytes.length; i += chunk) pieces.push(new asn1js.OctetString({ valueHex: bytes.slice(i, i + chunk) }));
  const constructed = (value: asn1js.OctetString[]) => new asn1js.OctetString({ idBlock: { isConstructed: true }, isConstructed: true, value });
  return constructed(nested ? [pieces[0]!, constructed(pieces.slice(1))] : pieces);
}

async function timestamp(root: TestCertificate, leaf: TestCertificate, bytes: Uint8Array, opts: TimestampOptions): Promise<Uint8Array> {
  const hash = opts.hash ?? "sha256";
  const imprint = createHash(hash)
    .update(opts.imprintOf ?? bytes)
    .digest();
  const accuracy = Object.fromEntries(Object.entries(opts.accuracy ?? {}).filter(([, v]) => v !== undefined));
  const tstInfo = new pkijs.TSTInfo({
    version: 1,
    policy: opts.policy ?? TEST_TSA_POLICY,
    messageImprint: new pkijs.MessageImprint({
      hashAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: OID[hash] }),
      hashedMessage: new asn1js.OctetString({ valueHex: imprint }),
    }),
    serialNumber: new asn1js.Integer({ valueHex: Uint8Array.of(0x01, ...randomBytes(8)) }),
    genTime: opts.genTime ?? new Date(),
    ...(opts.accuracy ? { accuracy: new pkijs.Accuracy(accuracy) } : {}),
  });
  const tstDer = new Uint8Array(tstInfo.toSchema().toBER());

  const leafCert = certificateOf(leaf.der);
  const digested = opts.wrongMessageDigest ? Uint8Array.of(...tstDer, 0) : tstDer;
  const attributes = [
    ...(opts.omitContentTypeAttribute ? [] : [attribute(OID.contentType, new asn1js.ObjectIdentifier({ value: OID.tstInfo }))]),
    attribute(OID.messageDigest, new asn1js.OctetString({ valueHex: createHash(hash).update(digested).digest() })),
    ...(opts.signingCertificate ?? [{ version: 2 }]).map((spec) => signingCertificateAttribute(spec, leaf.der)),
  ];

  const bySki = opts.sid === "subjectKeyIdentifier";
  let sid: pkijs.IssuerAndSerialNumber | asn1js.Primitive;
  if (bySki) {
    const ski = leafCert.extensions?.find((e) => e.extnID === OID.subjectKeyIdentifier);
    if (!ski) throw new Error("the TSA leaf has no subjectKeyIdentifier");
    const keyId = (asn1js.fromBER(ski.extnValue.valueBlock.valueHexView).result as asn1js.OctetString).valueBlock.valueHexView;
    // SignerIdentifier's subjectKeyIdentifier [0] SubjectKeyIdentifier, implicitly tagged (RFC 5652 section 5.3).
    sid = new asn1js.Primitive({ idBlock: { tagClass: 3, tagNumber: 0 }, valueHex: keyId });
  } else sid = new pkijs.IssuerAndSerialNumber({ issuer: leafCert.issuer, serialNumber: leafCert.serialNumber });

  const signedData = new pkijs.SignedData({
    version: 3,
    encapContentInfo: new pkijs.EncapsulatedContentInfo({ eContentType: OID.tstInfo }),
    signerInfos: [
      new pkijs.SignerInfo({
        version: bySki ? 3 : 1,
        sid,
        signedAttrs: new pkijs.SignedAndUnsignedAttributes({ type: 0, attributes }),
      }),
    ],
    ...(opts.includeCertificates === false ? {} : { certificates: [leafCert, certificateOf(root.der)] }),
  });
  // Set after construction: EncapsulatedContentInfo's constructor turns an OCTET STRING into BER's constructed form.
  signedData.encapContentInfo.eContent = opts.berContent
    ? constructedOctetString(tstDer, opts.berChunk ?? 32, opts.berNested)
    : new asn1js.OctetString({ valueHex: tstDer });
  // With signed attributes, pkijs signs their DER as a SET OF (RFC 5652 section 5.4).
  await signedData.sign(await signingKey(leaf.privateKey, leaf.keyType, WEB_HASH[hash]), 0, WEB_HASH[hash]);
  if (opts.corruptSignature) {
    const signer = signedData.signerInfos[0]!;
    const signature = Uint8Array.from(signer.signature.valueBlock.valueHexView);
    const last = signature.length - 1;
    signature[last] = signature[last]! ^ 0x01;
    signer.signature = new asn1js.OctetString({ valueHex: signature });
  }

  const contentInfo = new pkijs.ContentInfo({ contentType: OID.signedData, content: signedData.toSchema(true) });
  return new Uint8Array(contentInfo.toSchema().toBER());
}
