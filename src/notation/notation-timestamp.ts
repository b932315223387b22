// The RFC 3161 countersignature of a notary.x509 signature: a time-stamping authority (TSA) signed, at genTime, the
// hash of the signature's bytes. It is what lets a signature outlive its certificate: the chain must have been valid
// throughout [genTime - accuracy, genTime + accuracy] instead of now. The token (CMS SignedData over a TSTInfo) is read
// with @peculiar/asn1-cms and @peculiar/asn1-tsp (the project's ASN.1 family), but for two things they do not give,
// which a small BER walk at the end of this file reads: the signed attributes' bytes as received, and the TSTInfo when
// its OCTET STRING is in BER's constructed form. Its signature is checked with node:crypto. @sigstore/core's RFC 3161
// reader is not used: it reads a TimeStampResp rather than a bare token, and knows only ECDSA signatures, while the
// TSAs Notation users rely on sign with RSA.
import { constants, createHash, verify as verifySignature, type KeyObject } from "node:crypto";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { ContentInfo, SignedData, id_signedData, type SignerInfo } from "@peculiar/asn1-cms";
import { TSTInfo, id_ct_tstInfo } from "@peculiar/asn1-tsp";
import { Certificate, SubjectKeyIdentifier } from "@peculiar/asn1-x509";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { checkChainProfile, checkTrusted, checkValidity, readChain, type ReadChain } from "./notation-certificates.ts";

export type NotationTimestampErrorCode =
  /** The token is not a time-stamp token. */
  | "malformed"
  /** It time-stamps other bytes than the signature's. */
  | "imprint"
  /** The TSA's signature over it does not verify, or names no certificate the token or the store holds. */
  | "signature";

export class NotationTimestampError extends ImprimaturError<NotationTimestampErrorCode> {}

export interface VerifiedTimestamp {
  genTime: Date;
  /** genTime less and plus the TSA's stated accuracy: the signing chain must be valid throughout. */
  earliest: Date;
  latest: Date;
  /** The TSA's chain, leaf first, ending in the tsa store. */
  tsaChain: ReadChain;
}

const HASHES: Record<string, "sha256" | "sha384" | "sha512"> = {
  "2.16.840.1.101.3.4.2.1": "sha256",
  "2.16.840.1.101.3.4.2.2": "sha384",
  "2.16.840.1.101.3.4.2.3": "sha512",
};
const MESSAGE_DIGEST = "1.2.840.113549.1.9.4";
const CONTENT_TYPE = "1.2.840.113549.1.9.3";
/** ETSI EN 319 422's baseline time-stamp policy: an accuracy of one second when the token states none. */
const ETSI_BASELINE_POLICY = "0.4.0.2023.1.1";
const MAX_CHAIN = 8;

/**
 * Verifies `token` as a time stamp of `signature` by a TSA whose chain (from the token's certificates and the store's)
 * ends in `tsaStore` (named `storeName` in messages), each certificate fitting the time-stamping profile and valid at
 * genTime. Throws NotationTimestampError, or NotationCertificateError for the TSA's chain.
 */
export function verifyTimestamp(token: Uint8Array, signature: Uint8Array, tsaStore: readonly Uint8Array[], storeName: string): VerifiedTimestamp {
  let signedData: SignedData;
  let content: Uint8Array;
  let tstInfo: TSTInfo;
  try {
    const info = AsnConvert.parse(token, ContentInfo);
    if (info.contentType !== id_signedData) throw new Error(`content type ${info.contentType}, not signed data`);
    signedData = AsnConvert.parse(info.content, SignedData);
    const encap = signedData.encapContentInfo;
    if (encap.eContentType !== id_ct_tstInfo) throw new Error(`encapsulated content ${encap.eContentType}, not a TSTInfo`);
    content = encapsulatedContent(signedData);
    tstInfo = AsnConvert.parse(content, TSTInfo);
  } catch (e) {
    throw new NotationTimestampError("malformed", `the timestamp is not an RFC 3161 time-stamp token: ${(e as Error).message}`);
  }
  if (tstInfo.version !== 1) throw new NotationTimestampError("malformed", `TSTInfo version ${tstInfo.version}, not 1`);

  const imprintHash = HASHES[tstInfo.messageImprint.hashAlgorithm.algorithm];
  if (!imprintHash)
    throw new NotationTimestampError(
      "imprint",
      `the timestamp's hash algorithm ${tstInfo.messageImprint.hashAlgorithm.algorithm} is not SHA-256, -384 or -512`,
    );
  const expected = createHash(imprintHash).update(signature).digest();
  if (!expected.equals(Buffer.from(tstInfo.messageImprint.hashedMessage.buffer)))
    throw new NotationTimestampError("imprint", "the timestamp is of other bytes than this signature");

  if (signedData.signerInfos.length !== 1) throw new NotationTimestampError("malformed", `the token has ${signedData.signerInfos.length} signers, not one`);
  const signer = signedData.signerInfos[0]!;
  const candidates = [
    ...(signedData.certificates ?? []).flatMap((c) => (c.certificate ? [new Uint8Array(AsnConvert.serialize(c.certificate))] : [])),
    ...tsaStore,
  ];
  const leaf = candidates.find((der) => isSigner(signer, der));
  if (!leaf) throw new NotationTimestampError("signature", "the token names a signing certificate that neither it nor the tsa trust store holds");
  const tsaChain = readChain(chainFrom(leaf, candidates));
  checkSignerInfo(signer, signedAttributesOf(token), content, tsaChain.node[0]!.publicKey);
  checkChainProfile(tsaChain, "timeStamping");
  checkTrusted(tsaChain, tsaStore, storeName);
  const genTime = tstInfo.genTime;
  checkValidity(tsaChain, genTime, genTime, `the time stamp's genTime ${genTime.toISOString()}`);

  const accuracyMs = accuracyOf(tstInfo);
  return { genTime, earliest: new Date(genTime.getTime() - accuracyMs), latest: new Date(genTime.getTime() + accuracyMs), tsaChain };
}

/** In whole milliseconds, rounded up: a Date holds no fraction of one, and the window must not be narrower than stated. */
function accuracyOf(tst: TSTInfo): number {
  const a = tst.accuracy;
  if (!a) return tst.policy === ETSI_BASELINE_POLICY ? 1000 : 0;
  return Math.ceil(((a.seconds ?? 0) * 1_000_000 + (a.millis ?? 0) * 1000 + (a.micros ?? 0)) / 1000);
}

/** Whether `der` is the certificate the signer info names (issuer and serial number, or subject key identifier). */
function isSigner(signer: SignerInfo, der: Uint8Array): boolean {
  let cert: Certificate;
  try {
    cert = AsnConvert.parse(der, Certificate);
  } catch {
    return false;
  }
  const byIssuer = signer.sid.issuerAndSerialNumber;
  if (byIssuer)
    return (
      Buffer.from(AsnConvert.serialize(byIssuer.issuer)).equals(Buffer.from(AsnConvert.serialize(cert.tbsCertificate.issuer))) &&
      Buffer.from(byIssuer.serialNumber).equals(Buffer.from(cert.tbsCertificate.serialNumber))
    );
  const keyId = signer.sid.subjectKeyIdentifier;
  if (!keyId) return false;
  const ski = cert.tbsCertificate.extensions?.find((e) => e.extnID === "2.5.29.14");
  if (!ski) return false;
  return Buffer.from(AsnConvert.parse(ski.extnValue.buffer, SubjectKeyIdentifier).buffer).equals(Buffer.from(keyId.buffer));
}

/** From the TSA's certificate up to a self-signed one, through the certificates at hand, by issuer and signature. */
function chainFrom(leaf: Uint8Array, candidates: readonly Uint8Array[]): Uint8Array[] {
  const chain = [leaf];
  for (let i = 0; i < MAX_CHAIN; i++) {
    const current = readChain([chain.at(-1)!]);
    const node = current.node[0]!;
    if (node.checkIssued(node) && node.verify(node.publicKey)) return chain;
    const next = candidates.find((der) => {
      const issuer = readChain([der]).node[0]!;
      return node.issuer === issuer.subject && node.verify(issuer.publicKey) && !chain.some((c) => Buffer.from(c).equals(Buffer.from(der)));
    });
    if (!next) return chain; // incomplete: the profile check says so
    chain.push(next);
  }
  return chain;
}

/**
 * The signed attributes name a TSTInfo and the digest of `content` (the TSTInfo's bytes), and the TSA's key signed
 * them (`raw`: their encoding as received, [0] tag included).
 */
function checkSignerInfo(signer: SignerInfo, raw: Uint8Array | undefined, content: Uint8Array, key: KeyObject): void {
  const digest = HASHES[signer.digestAlgorithm.algorithm];
  if (!digest) throw new NotationTimestampError("signature", `the token's digest algorithm ${signer.digestAlgorithm.algorithm} is not SHA-256, -384 or -512`);
  if (!signer.signedAttrs || !raw) throw new NotationTimestampError("signature", "the token has no signed attributes (or they cannot be read)");
  const attribute = (type: string) => signer.signedAttrs!.find((a) => a.attrType === type)?.attrValues[0];
  const contentType = attribute(CONTENT_TYPE);
  if (!contentType || !Buffer.from(contentType).equals(TSTINFO_OID_DER))
    throw new NotationTimestampError("signature", "the signed content-type attribute is not id-ct-TSTInfo");
  const messageDigest = attribute(MESSAGE_DIGEST);
  if (!messageDigest) throw new NotationTimestampError("signature", "the token has no message-digest attribute");
  const stated = Buffer.from(AsnConvert.parse(messageDigest, OctetString).buffer);
  if (!stated.equals(createHash(digest).update(content).digest()))
    throw new NotationTimestampError("signature", "the signed message digest is not the TSTInfo's");
  // The signature covers the DER of the attributes as a SET OF (RFC 5652 section 5.4), not as the [0] they are sent as.
  const signedBytes = Buffer.from(raw);
  signedBytes[0] = 0x31;
  const algorithm = signer.signatureAlgorithm.algorithm;
  const options =
    algorithm === RSASSA_PSS
      ? { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO }
      : { key, dsaEncoding: "der" as const };
  if (!verifySignature(digest, signedBytes, options, Buffer.from(signer.signature.buffer)))
    throw new NotationTimestampError("signature", "the TSA's signature over the token does not verify");
}

const RSASSA_PSS = "1.2.840.113549.1.1.10";
/** The DER of OBJECT IDENTIFIER id-ct-TSTInfo (1.2.840.113549.1.9.16.1.4): the content-type attribute's value. */
const TSTINFO_OID_DER = Buffer.from("060b2a864886f70d0109100104", "hex");

// ---------------------------------------------------------------------------------------------------------------
// A minimal BER walk, for what asn1-schema (2.11) does not give. It leaves SignerInfo.signedAttrsRaw unset (its `raw`
// option is not applied to a repeated field), and it reads an eContent OCTET STRING in BER's constructed form (which
// CMS allows outside the signed attributes: RFC 5652 section 2) as the choice's `any`, the whole encoding.

interface Tlv {
  tag: number;
  start: number;
  contentStart: number;
  /** Excludes an indefinite length's end-of-contents octets. */
  contentEnd: number;
  end: number;
}

const MAX_DEPTH = 32;

/** The element at `offset`, within `limit` (low tag numbers only: all CMS uses). */
function readTlv(der: Uint8Array, offset: number, limit: number, depth = 0): Tlv {
  if (depth > MAX_DEPTH) throw new Error("nested too deep");
  if (offset + 2 > limit) throw new Error("truncated");
  const tag = der[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new Error(`unexpected high tag number at ${offset}`);
  const first = der[offset + 1]!;
  let pos = offset + 2;
  if (first === 0x80) {
    if (!(tag & 0x20)) throw new Error(`indefinite length of a primitive at ${offset}`);
    for (;;) {
      if (pos + 2 > limit) throw new Error("truncated");
      if (der[pos] === 0 && der[pos + 1] === 0) return { tag, start: offset, contentStart: offset + 2, contentEnd: pos, end: pos + 2 };
      pos = readTlv(der, pos, limit, depth + 1).end;
    }
  }
  let length = first;
  if (first > 0x80) {
    const n = first & 0x7f;
    if (n > 4 || pos + n > limit) throw new Error(`bad length at ${offset}`);
    length = 0;
    for (let i = 0; i < n; i++) length = length * 256 + der[pos++]!;
  }
  if (pos + length > limit) throw new Error("truncated");
  return { tag, start: offset, contentStart: pos, contentEnd: pos + length, end: pos + length };
}

function childrenOf(der: Uint8Array, parent: Tlv, depth = 0): Tlv[] {
  const out: Tlv[] = [];
  for (let pos = parent.contentStart; pos < parent.contentEnd;) {
    const child = readTlv(der, pos, parent.contentEnd, depth + 1);
    out.push(child);
    pos = child.end;
  }
  return out;
}

/** An OCTET STRING's value: its contents, or in the constructed form its pieces' values, concatenated. */
function octetStringValue(der: Uint8Array, tlv: Tlv, depth = 0): Uint8Array {
  if (tlv.tag === 0x04) return der.subarray(tlv.contentStart, tlv.contentEnd);
  if (tlv.tag === 0x24 && depth < MAX_DEPTH) return Buffer.concat(childrenOf(der, tlv, depth).map((piece) => octetStringValue(der, piece, depth + 1)));
  throw new Error("the encapsulated content is not an OCTET STRING");
}

/** The TSTInfo's bytes: the eContent OCTET STRING's value, in either form. */
function encapsulatedContent(signedData: SignedData): Uint8Array {
  const eContent = signedData.encapContentInfo.eContent;
  if (eContent?.single) return new Uint8Array(eContent.single.buffer);
  if (!eContent?.any) throw new Error("no TSTInfo");
  const der = new Uint8Array(eContent.any);
  return octetStringValue(der, readTlv(der, 0, der.length));
}

/**
 * The one signer's signed attributes as the token encodes them, [0] tag and all: ContentInfo → [0] → SignedData, whose
 * last field is signerInfos → the first SignerInfo, whose fourth field they are when present. Undefined when absent.
 */
function signedAttributesOf(token: Uint8Array): Uint8Array | undefined {
  try {
    const contentInfo = readTlv(token, 0, token.length);
    const explicit = childrenOf(token, contentInfo)[1];
    const signedData = explicit && childrenOf(token, explicit)[0];
    const signerInfos = signedData && childrenOf(token, signedData).at(-1);
    const signer = signerInfos?.tag === 0x31 ? childrenOf(token, signerInfos)[0] : undefined;
    const attributes = signer && childrenOf(token, signer)[3];
    return attributes?.tag === 0xa0 ? token.subarray(attributes.start, attributes.end) : undefined;
  } catch {
    return undefined;
  }
}
