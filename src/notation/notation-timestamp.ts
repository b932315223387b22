// The RFC 3161 countersignature of a notary.x509 signature: a time-stamping authority (TSA) signed, at genTime, the
// hash of the signature's bytes. It is what lets a signature outlive its certificate: the chain must have been valid
// throughout [genTime - accuracy, genTime + accuracy] instead of now. The token (CMS SignedData over a TSTInfo) is read
// once with asn1js, the BER parser under the project's ASN.1 family, which keeps each element's bytes as received: the
// signed attributes (which the signature covers), the TSTInfo in either form of its OCTET STRING, and the certificates
// the token carries. Its parts are then read with @peculiar/asn1-cms and @peculiar/asn1-tsp, which give neither the
// attributes' bytes (asn1-schema 2.11 leaves SignerInfo.signedAttrsRaw unset) nor the TSTInfo of a constructed OCTET
// STRING. Its signature is checked with node:crypto. @sigstore/core's RFC 3161 reader is not used: it reads a
// TimeStampResp rather than a bare token, and knows only ECDSA signatures, while the TSAs Notation users rely on sign
// with RSA.
import { constants, createHash, verify as verifySignature, type KeyObject } from "node:crypto";
import * as asn1js from "asn1js";
import { AsnConvert, AsnParser, OctetString } from "@peculiar/asn1-schema";
import { Attribute, ContentInfo, SignedData, id_signedData, type SignerInfo } from "@peculiar/asn1-cms";
import { TSTInfo, id_ct_tstInfo } from "@peculiar/asn1-tsp";
import { AlgorithmIdentifier, Certificate, GeneralNames, SubjectKeyIdentifier } from "@peculiar/asn1-x509";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { checkChainProfile, checkTrusted, checkValidity, issuedBy, readChain, type ReadChain } from "./notation-certificates.ts";

export type NotationTimestampErrorCode =
  /** The token is not a time-stamp token. */
  | "malformed"
  /** It time-stamps other bytes than the signature's. */
  | "imprint"
  /**
   * The TSA's signature over it does not verify, names no certificate the token or the store holds, or its signed
   * attributes do not name the TSTInfo and (ESS signing-certificate attribute) the certificate that signed.
   */
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

const SHA256 = "2.16.840.1.101.3.4.2.1";
const HASHES: Record<string, "sha256" | "sha384" | "sha512"> = {
  [SHA256]: "sha256",
  "2.16.840.1.101.3.4.2.2": "sha384",
  "2.16.840.1.101.3.4.2.3": "sha512",
};
const MESSAGE_DIGEST = "1.2.840.113549.1.9.4";
const CONTENT_TYPE = "1.2.840.113549.1.9.3";
/** ESS signingCertificateV2 (RFC 5035), which RFC 5816 lets a TSA use, and its SHA-1 predecessor (RFC 2634). */
const SIGNING_CERTIFICATE_V2 = "1.2.840.113549.1.9.16.2.47";
const SIGNING_CERTIFICATE = "1.2.840.113549.1.9.16.2.12";
/** ETSI EN 319 422's baseline time-stamp policy: an accuracy of one second when the token states none. */
const ETSI_BASELINE_POLICY = "0.4.0.2023.1.1";
const MAX_CHAIN = 8;
/**
 * What asn1js reads of a token: a TSA's token is a few KiB (the envelope around it at most MAX_ENVELOPE_BYTES), some
 * hundred elements a dozen deep. OCTET STRINGs are not read into (asn1js's parseEmbedded): the TSTInfo is read on its own.
 */
const BER_LIMITS: asn1js.FromBerOptions = { maxDepth: 32, maxNodes: 10_000, parseEmbedded: false };

/**
 * Verifies `token` as a time stamp of `signature` by a TSA whose chain (from the token's certificates and the store's)
 * ends in `tsaStore` (named `storeName` in messages), each certificate fitting the time-stamping profile and valid at
 * genTime. Throws NotationTimestampError, or NotationCertificateError for the TSA's chain.
 */
export function verifyTimestamp(token: Uint8Array, signature: Uint8Array, tsaStore: readonly Uint8Array[], storeName: string): VerifiedTimestamp {
  let read: TokenParts;
  let tstInfo: TSTInfo;
  try {
    read = readToken(token);
    tstInfo = AsnParser.fromASN(readBer(read.content), TSTInfo);
  } catch (e) {
    throw new NotationTimestampError("malformed", `the timestamp is not an RFC 3161 time-stamp token: ${(e as Error).message}`);
  }
  const { signedData } = read;
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
  const candidates = [...read.certificates, ...tsaStore];
  const leaf = candidates.find((der) => isSigner(signer, der));
  if (!leaf) throw new NotationTimestampError("signature", "the token names a signing certificate that neither it nor the tsa trust store holds");
  const tsaChain = readChain(chainFrom(leaf, candidates));
  checkSignerInfo(signer, read.signedAttrs, read.content, leaf, tsaChain.node[0]!.publicKey);
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
  // Every certificate at hand read once; issuers found as the chain's own links are checked (issuedBy).
  const pool = readChain(candidates);
  const chain = [candidates.indexOf(leaf)];
  let at = chain[0]!;
  while (chain.length <= MAX_CHAIN && !issuedBy(pool, at, at)) {
    // A certificate the chain already holds (the token and the store may both carry it) is not taken again.
    const inChain = (j: number) => chain.some((c) => Buffer.from(pool.der[c]!).equals(Buffer.from(pool.der[j]!)));
    const next = pool.node.findIndex((_, j) => !inChain(j) && issuedBy(pool, at, j));
    if (next < 0) break; // incomplete: the profile check says so
    chain.push(next);
    at = next;
  }
  return chain.map((j) => candidates[j]!);
}

/**
 * The signed attributes name a TSTInfo, the digest of `content` (the TSTInfo's bytes) and, by its hash, the TSA's
 * certificate `leaf`; and the TSA's key signed them.
 */
function checkSignerInfo(signer: SignerInfo, signedAttrs: SignedAttributes | undefined, content: Uint8Array, leaf: Uint8Array, key: KeyObject): void {
  const digest = HASHES[signer.digestAlgorithm.algorithm];
  if (!digest) throw new NotationTimestampError("signature", `the token's digest algorithm ${signer.digestAlgorithm.algorithm} is not SHA-256, -384 or -512`);
  if (!signedAttrs) throw new NotationTimestampError("signature", "the token has no signed attributes");
  const attribute = (type: string, name: string) => attributeValue(signedAttrs.attributes, type, name);
  const contentType = attribute(CONTENT_TYPE, "content-type");
  if (!contentType || !Buffer.from(contentType).equals(TSTINFO_OID_DER))
    throw new NotationTimestampError("signature", "the signed content-type attribute is not id-ct-TSTInfo");
  const messageDigest = attribute(MESSAGE_DIGEST, "message-digest");
  if (!messageDigest) throw new NotationTimestampError("signature", "the token has no message-digest attribute");
  const stated = Buffer.from(AsnConvert.parse(messageDigest, OctetString).buffer);
  if (!stated.equals(createHash(digest).update(content).digest()))
    throw new NotationTimestampError("signature", "the signed message digest is not the TSTInfo's");
  const v2 = attribute(SIGNING_CERTIFICATE_V2, "signingCertificateV2");
  const v1 = v2 ? undefined : attribute(SIGNING_CERTIFICATE, "signingCertificate");
  if (!v2 && !v1)
    throw new NotationTimestampError("signature", "the token has no signing-certificate attribute (ESS signingCertificateV2) naming the TSA's certificate");
  checkSigningCertificate(v2 ?? v1!, v2 !== undefined, leaf);
  // The signature covers the DER of the attributes as a SET OF (RFC 5652 section 5.4), not as the [0] they are sent as.
  const signedBytes = Buffer.from(signedAttrs.raw);
  signedBytes[0] = 0x31;
  const algorithm = signer.signatureAlgorithm.algorithm;
  const options =
    algorithm === RSASSA_PSS
      ? { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO }
      : { key, dsaEncoding: "der" as const };
  if (!verifySignature(digest, signedBytes, options, Buffer.from(signer.signature.buffer)))
    throw new NotationTimestampError("signature", "the TSA's signature over the token does not verify");
}

/** The one value of the one attribute of `type`; undefined when there is none (RFC 5652 section 11 allows no more). */
function attributeValue(attributes: readonly Attribute[], type: string, name: string): ArrayBuffer | undefined {
  const found = attributes.filter((a) => a.attrType === type);
  if (found.length === 0) return undefined;
  if (found.length > 1 || found[0]!.attrValues.length !== 1)
    throw new NotationTimestampError("signature", `the token's signed ${name} attribute is not one attribute with one value`);
  return found[0]!.attrValues[0];
}

/**
 * The ESS signing-certificate attribute (`value`, of signingCertificateV2 when `v2`, else of signingCertificate) names
 * the certificate whose key signed, so that no other certificate for that key can stand in for it: its first
 * ESSCertID(v2) must be the hash of `leaf` as received (by its hashAlgorithm, SHA-256 by default; SHA-1 in v1), and
 * its issuerSerial, when present, `leaf`'s issuer and serial number (RFC 5035 section 5.4, RFC 2634 section 5.4).
 */
function checkSigningCertificate(value: ArrayBuffer, v2: boolean, leaf: Uint8Array): void {
  const name = v2 ? "signingCertificateV2" : "signingCertificate";
  let certId: EssCertId;
  try {
    certId = readEssCertId(value, v2);
  } catch (e) {
    throw new NotationTimestampError("signature", `the token's ${name} attribute cannot be read: ${(e as Error).message}`);
  }
  const hash = v2 ? HASHES[certId.hashAlgorithm ?? SHA256] : "sha1";
  if (!hash) throw new NotationTimestampError("signature", `the ${name} attribute's hash algorithm ${certId.hashAlgorithm} is not SHA-256, -384 or -512`);
  if (!createHash(hash).update(leaf).digest().equals(certId.certHash))
    throw new NotationTimestampError("signature", `the ${name} attribute names another certificate than the one that signed the token`);
  if (!certId.issuerSerial) return;
  const cert = AsnConvert.parse(leaf, Certificate).tbsCertificate;
  const issuer = Buffer.from(AsnConvert.serialize(cert.issuer));
  const { issuerNames, serialNumber } = certId.issuerSerial;
  const issuerNamed = issuerNames.some((n) => n.directoryName && issuer.equals(Buffer.from(AsnConvert.serialize(n.directoryName))));
  if (!issuerNamed || !Buffer.from(cert.serialNumber).equals(serialNumber))
    throw new NotationTimestampError("signature", `the ${name} attribute names another issuer and serial number than the signing certificate's`);
}

/** The first ESSCertID(v2) of a SigningCertificate(V2). */
interface EssCertId {
  /** v2's hashAlgorithm OID, when not left to its DEFAULT. */
  hashAlgorithm?: string;
  certHash: Uint8Array;
  issuerSerial?: { issuerNames: GeneralNames; serialNumber: Uint8Array };
}

function readEssCertId(value: ArrayBuffer, v2: boolean): EssCertId {
  // SigningCertificate(V2) ::= SEQUENCE { certs SEQUENCE OF ESSCertID(v2), policies ... OPTIONAL }, read up to the first
  // of certs, the signer's (RFC 5035 section 5.4): ESSCertIDv2 ::= SEQUENCE { hashAlgorithm AlgorithmIdentifier
  // DEFAULT id-sha256, certHash OCTET STRING, issuerSerial SEQUENCE { issuer GeneralNames, serialNumber INTEGER }
  // OPTIONAL }; ESSCertID has no hashAlgorithm.
  const schema = new asn1js.Sequence({
    value: [
      new asn1js.Sequence({
        value: [
          new asn1js.Sequence({
            value: [
              ...(v2 ? [new asn1js.Sequence({ name: "hashAlgorithm", optional: true })] : []),
              new asn1js.OctetString({ name: "certHash" }),
              new asn1js.Sequence({
                optional: true,
                value: [new asn1js.Sequence({ name: "issuer" }), new asn1js.Integer({ name: "serialNumber" })],
              }),
            ],
          }),
        ],
      }),
    ],
  });
  // As asn1js's own verifySchema does, the element read is the root the schema's named parts are set on.
  const element = readBer(new Uint8Array(value));
  const compared = asn1js.compareSchema(element, element, schema);
  if (!compared.verified) throw new Error("it is not a SigningCertificate with an ESSCertID");
  const found = compared.result as unknown as {
    hashAlgorithm?: asn1js.Sequence;
    certHash: asn1js.OctetString;
    issuer?: asn1js.Sequence;
    serialNumber?: asn1js.Integer;
  };
  return {
    ...(found.hashAlgorithm ? { hashAlgorithm: AsnParser.fromASN(found.hashAlgorithm, AlgorithmIdentifier).algorithm } : {}),
    certHash: found.certHash.valueBlock.valueHexView,
    ...(found.issuer && found.serialNumber
      ? { issuerSerial: { issuerNames: AsnParser.fromASN(found.issuer, GeneralNames), serialNumber: found.serialNumber.valueBlock.valueHexView } }
      : {}),
  };
}

/** What readToken takes from the token, its parts' bytes as received. */
interface TokenParts {
  signedData: SignedData;
  /** The TSTInfo's bytes: the eContent OCTET STRING's value, in either form. */
  content: Uint8Array;
  /** The certificates of SignedData.certificates (other kinds of CertificateChoices left out). */
  certificates: Uint8Array[];
  /** The first signer's signed attributes; undefined when absent. */
  signedAttrs?: SignedAttributes;
}

interface SignedAttributes {
  /** Their encoding as received, [0] tag and all. */
  raw: Uint8Array;
  attributes: Attribute[];
}

/** `bytes` as one BER element, within BER_LIMITS, with nothing after it. */
function readBer(bytes: Uint8Array): asn1js.AsnType {
  const { offset, result } = asn1js.fromBER(bytes, BER_LIMITS);
  if (offset === -1 || result.error) throw new Error(result.error || "not BER");
  if (offset !== bytes.length) throw new Error(`${bytes.length - offset} bytes after its end`);
  return result;
}

/** The elements of a SEQUENCE, SET or constructed context-specific [n]; none of anything else. */
function elementsOf(element: asn1js.AsnType | undefined): asn1js.AsnType[] {
  return element instanceof asn1js.Constructed ? (element.valueBlock.value as asn1js.AsnType[]) : [];
}

function isTagged(element: asn1js.AsnType | undefined, tagClass: number, tagNumber: number, constructed: boolean): boolean {
  return element?.idBlock.tagClass === tagClass && element.idBlock.tagNumber === tagNumber && element.idBlock.isConstructed === constructed;
}

const UNIVERSAL = 1;
const CONTEXT = 3;

/** An OCTET STRING's value: its contents or, in BER's constructed form, its pieces' values (nested or not) in turn. */
function octetsOf(element: asn1js.OctetString): Uint8Array {
  if (!element.idBlock.isConstructed) return element.valueBlock.valueHexView;
  // asn1js has checked that each piece is an OCTET STRING; OctetString.getValue() reads one level of them only.
  return Buffer.concat((element.valueBlock.value as asn1js.OctetString[]).map(octetsOf));
}

function readToken(token: Uint8Array): TokenParts {
  const contentInfo = readBer(token);
  const info = AsnParser.fromASN(contentInfo, ContentInfo);
  if (info.contentType !== id_signedData) throw new Error(`content type ${info.contentType}, not signed data`);
  // ContentInfo ::= SEQUENCE { contentType, content [0] EXPLICIT ANY }, which asn1-cms has just checked.
  const signedDataElement = elementsOf(elementsOf(contentInfo)[1])[0];
  if (!signedDataElement) throw new Error("no signed data");
  const signedData = AsnParser.fromASN(signedDataElement, SignedData);
  const encap = signedData.encapContentInfo;
  if (encap.eContentType !== id_ct_tstInfo) throw new Error(`encapsulated content ${encap.eContentType}, not a TSTInfo`);
  // SignedData ::= SEQUENCE { version, digestAlgorithms, encapContentInfo, certificates [0] IMPLICIT OPTIONAL,
  // crls [1] IMPLICIT OPTIONAL, signerInfos SET OF SignerInfo }; EncapsulatedContentInfo ::= SEQUENCE { eContentType,
  // eContent [0] EXPLICIT OCTET STRING OPTIONAL }.
  const fields = elementsOf(signedDataElement);
  const eContent = elementsOf(elementsOf(fields[2])[1])[0];
  if (!(eContent instanceof asn1js.OctetString)) throw new Error("no TSTInfo");
  // CertificateChoices: a Certificate is a SEQUENCE, the other kinds are tagged [0] to [3].
  const certificateSet = fields.slice(3, -1).find((f) => isTagged(f, CONTEXT, 0, true));
  const certificates = elementsOf(certificateSet).filter((c) => isTagged(c, UNIVERSAL, 16, true));
  // One that cannot be read makes the token malformed here, not a candidate the TSA's chain stumbles on.
  for (const c of certificates) AsnParser.fromASN(c, Certificate);
  // SignerInfo ::= SEQUENCE { version, sid, digestAlgorithm, signedAttrs [0] IMPLICIT SET OF Attribute OPTIONAL, ... }
  const signedAttrsElement = elementsOf(elementsOf(fields.at(-1))[0])[3];
  const signedAttrs = isTagged(signedAttrsElement, CONTEXT, 0, true)
    ? { raw: signedAttrsElement!.valueBeforeDecodeView.slice(), attributes: elementsOf(signedAttrsElement).map((a) => AsnParser.fromASN(a, Attribute)) }
    : undefined;
  return {
    signedData,
    content: octetsOf(eContent),
    certificates: certificates.map((c) => c.valueBeforeDecodeView.slice()),
    ...(signedAttrs ? { signedAttrs } : {}),
  };
}

const RSASSA_PSS = "1.2.840.113549.1.1.10";
/** The DER of OBJECT IDENTIFIER id-ct-TSTInfo (1.2.840.113549.1.9.16.1.4): the content-type attribute's value. */
const TSTINFO_OID_DER = Buffer.from("060b2a864886f70d0109100104", "hex");
