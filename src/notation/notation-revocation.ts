// Whether the certificates of a Notary Project signing chain were revoked, as the Notary Project trust store and
// trust policy specification's "Certificate Revocation Evaluation" describes it: every certificate but the root, by
// OCSP (RFC 6960) at its Authority Information Access responders first, then by the CRLs (RFC 5280) of its CRL
// Distribution Points; a certificate naming neither cannot be revoked. Any certificate revoked makes the chain
// revoked; else any whose status could not be told makes it unknown. The bytes come through a fetcher (I/O at the
// edge: src/verification/revocation-fetcher.ts); everything here judges them.
//
// OCSP requests and responses are read and written with @peculiar/asn1-ocsp (the ASN.1 schema family already used
// for CMS and RFC 3161 tokens, which keeps the signed bytes as received), CRLs with @peculiar/x509 (the project's
// X.509 library: parsing, signature, entries); signatures are checked with node:crypto.
import { createHash, verify as verifySignature, X509Certificate as NodeCertificate, type KeyObject } from "node:crypto";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { AlgorithmIdentifier, Certificate } from "@peculiar/asn1-x509";
import {
  BasicOCSPResponse,
  CertID,
  OCSPRequest,
  OCSPResponse,
  OCSPResponseStatus,
  Request,
  TBSRequest,
  id_kp_OCSPSigning,
  id_pkix_ocsp_basic,
} from "@peculiar/asn1-ocsp";
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { describeSubject, type ReadChain } from "./notation-certificates.ts";

/** Where revocation data comes from: the edge answers each URL with the bytes it returned, or throws why not. */
export interface RevocationFetcher {
  /** POSTs a DER OCSP request to `url` (application/ocsp-request); the DER response. */
  ocsp(url: string, request: Uint8Array): Promise<Uint8Array>;
  /** GETs the DER CRL at `url`. */
  crl(url: string): Promise<Uint8Array>;
}

export type ChainRevocation = { status: "good" } | { status: "revoked"; reason: string } | { status: "unknown"; reason: string };

type CertificateStatus = { status: "good" } | { status: "revoked"; at: Date; reason?: string; source: string } | { status: "unknown"; why: string };

/** Clock skew allowed between this server and a responder or CRL issuer. */
const SKEW_MS = 5 * 60_000;

/**
 * The revocation status of `chain` (leaf first, as verified: each issued by the next) at `now`. `signedAt`, for a
 * signing authority's signature: a revocation after that authentic signing time does not undo the signature.
 */
export async function checkChainRevocation(chain: ReadChain, fetcher: RevocationFetcher, now: Date, signedAt?: Date): Promise<ChainRevocation> {
  const statuses = await Promise.all(
    chain.parsed.slice(0, -1).map((cert, i) => certificateStatus(chain, i, fetcher, now).then((status) => ({ i, cert, status }))),
  );
  const describe = (i: number, cert: x509.X509Certificate) => `certificate ${i} (${describeSubject(cert)})`;
  for (const { i, cert, status } of statuses) {
    if (status.status !== "revoked") continue;
    if (signedAt && status.at.getTime() > signedAt.getTime()) continue;
    const reason = status.reason ? `, reason ${status.reason}` : "";
    return { status: "revoked", reason: `${describe(i, cert)} is revoked since ${status.at.toISOString()}${reason} (${status.source})` };
  }
  const unknown = statuses.filter((s) => s.status.status === "unknown");
  if (unknown.length > 0)
    return {
      status: "unknown",
      reason: unknown
        .map(({ i, cert, status }) => `the revocation status of ${describe(i, cert)} could not be told: ${(status as { why: string }).why}`)
        .join("; "),
    };
  return { status: "good" };
}

/** One certificate (`i`, issued by `i + 1`): OCSP responders in order, then CRLs, until one answers good or revoked. */
async function certificateStatus(chain: ReadChain, i: number, fetcher: RevocationFetcher, now: Date): Promise<CertificateStatus> {
  const cert = chain.parsed[i]!;
  const issuer = { parsed: chain.parsed[i + 1]!, key: chain.node[i + 1]!.publicKey };
  const { ocsp, crl } = revocationUrls(cert);
  if (ocsp.length === 0 && crl.length === 0) return { status: "good" }; // names no source: cannot be revoked
  const problems: string[] = [];
  for (const url of ocsp) {
    try {
      const status = judgeOcspResponse(await fetcher.ocsp(url, ocspRequestFor(cert, issuer.parsed)), cert, issuer, now);
      if (status.status !== "unknown") return status.status === "revoked" ? { ...status, source: `OCSP ${url}` } : status;
      problems.push(`OCSP ${url}: ${status.why}`);
    } catch (e) {
      problems.push(`OCSP ${url}: ${(e as Error).message}`);
    }
  }
  for (const url of crl) {
    try {
      const status = await judgeCrl(await fetcher.crl(url), cert, issuer, now);
      if (status.status !== "unknown") return status.status === "revoked" ? { ...status, source: `CRL ${url}` } : status;
      problems.push(`CRL ${url}: ${status.why}`);
    } catch (e) {
      problems.push(`CRL ${url}: ${(e as Error).message}`);
    }
  }
  return { status: "unknown", why: problems.join("; ") };
}

/** The HTTP(S) URLs of a certificate's OCSP responders and CRL distribution points, in the order it lists them (3 of each at most). */
export function revocationUrls(cert: x509.X509Certificate): { ocsp: string[]; crl: string[] } {
  const http = (url: string | undefined): url is string => url !== undefined && /^https?:\/\//i.test(url);
  const aia = cert.getExtension(x509.AuthorityInfoAccessExtension);
  const ocsp = (aia?.ocsp ?? []).filter((name) => name.type === "url").map((name) => name.value);
  const cdp = cert.getExtension(x509.CRLDistributionPointsExtension);
  const crl = (cdp?.distributionPoints ?? []).flatMap((point) => (point.distributionPoint?.fullName ?? []).map((name) => name.uniformResourceIdentifier));
  // A certificate names a few; more would only multiply the requests one verification makes.
  return { ocsp: ocsp.filter(http).slice(0, MAX_URLS), crl: crl.filter(http).slice(0, MAX_URLS) };
}

/** Responders, and separately CRLs, asked per certificate. */
const MAX_URLS = 3;

const SHA1 = "1.3.14.3.2.26";

/**
 * The DER OCSP request for one certificate: its CertID by SHA-1, as the lightweight profile (RFC 5019) that public
 * responders serve requires (an identifier, not a signature: the answer is signed and matched to the certificate).
 */
export function ocspRequestFor(cert: x509.X509Certificate, issuer: x509.X509Certificate): Uint8Array {
  const request = new OCSPRequest({ tbsRequest: new TBSRequest({ requestList: [new Request({ reqCert: certIdOf(cert, issuer, SHA1) })] }) });
  return new Uint8Array(AsnConvert.serialize(request));
}

const HASH_BY_OID: Record<string, string> = {
  [SHA1]: "sha1",
  "2.16.840.1.101.3.4.2.1": "sha256",
  "2.16.840.1.101.3.4.2.2": "sha384",
  "2.16.840.1.101.3.4.2.3": "sha512",
};

function certIdOf(cert: x509.X509Certificate, issuer: x509.X509Certificate, hashOid: string): CertID {
  const hash = (bytes: ArrayBuffer | Uint8Array) => createHash(HASH_BY_OID[hashOid]!).update(new Uint8Array(bytes)).digest();
  return new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: hashOid, parameters: null }),
    issuerNameHash: new OctetString(hash(issuer.subjectName.toArrayBuffer())),
    issuerKeyHash: new OctetString(hash(subjectPublicKeyBits(issuer))),
    serialNumber: hexToBytes(cert.serialNumber).buffer as ArrayBuffer,
  });
}

/** The subjectPublicKey BIT STRING's bytes (what an issuerKeyHash hashes). */
function subjectPublicKeyBits(cert: x509.X509Certificate): ArrayBuffer {
  return AsnConvert.parse(cert.rawData, Certificate).tbsCertificate.subjectPublicKeyInfo.subjectPublicKey;
}

/**
 * An OCSP response for `cert`: successful and basic, signed by the issuer or by a responder the issuer delegated
 * (issued by it, with the OCSP-signing EKU, valid now), naming the certificate, current at `now`.
 */
export function judgeOcspResponse(
  der: Uint8Array,
  cert: x509.X509Certificate,
  issuer: { parsed: x509.X509Certificate; key: KeyObject },
  now: Date,
): CertificateStatus {
  let basic: BasicOCSPResponse;
  try {
    const response = AsnConvert.parse(der, OCSPResponse);
    if (response.responseStatus !== OCSPResponseStatus.successful)
      return { status: "unknown", why: `the responder answered ${OCSPResponseStatus[response.responseStatus] ?? response.responseStatus}` };
    if (response.responseBytes?.responseType !== id_pkix_ocsp_basic) return { status: "unknown", why: "the response is not a basic OCSP response" };
    basic = AsnConvert.parse(response.responseBytes.response.buffer, BasicOCSPResponse);
  } catch (e) {
    return { status: "unknown", why: `the response cannot be read: ${(e as Error).message}` };
  }
  const signer = responderKey(basic, issuer, now);
  if ("why" in signer) return { status: "unknown", why: signer.why };
  const signed = basic.tbsResponseDataRaw ?? AsnConvert.serialize(basic.tbsResponseData);
  if (!signatureVerifies(basic.signatureAlgorithm, signer.key, new Uint8Array(signed), new Uint8Array(basic.signature)))
    return { status: "unknown", why: `the response's signature does not verify with ${signer.name}'s key` };

  const single = basic.tbsResponseData.responses.find((r) => {
    const hashOid = r.certID.hashAlgorithm.algorithm;
    if (!HASH_BY_OID[hashOid]) return false;
    const ours = certIdOf(cert, issuer.parsed, hashOid);
    return (
      Buffer.from(r.certID.issuerNameHash.buffer).equals(Buffer.from(ours.issuerNameHash.buffer)) &&
      Buffer.from(r.certID.issuerKeyHash.buffer).equals(Buffer.from(ours.issuerKeyHash.buffer)) &&
      Buffer.from(stripLeadingZeros(new Uint8Array(r.certID.serialNumber))).equals(Buffer.from(stripLeadingZeros(new Uint8Array(ours.serialNumber))))
    );
  });
  if (!single) return { status: "unknown", why: "the response does not name the certificate" };
  if (single.thisUpdate.getTime() > now.getTime() + SKEW_MS)
    return { status: "unknown", why: `the response is from the future (${single.thisUpdate.toISOString()})` };
  if (single.nextUpdate && single.nextUpdate.getTime() < now.getTime() - SKEW_MS)
    return { status: "unknown", why: `the response is out of date (next update ${single.nextUpdate.toISOString()})` };
  const status = single.certStatus;
  if (status.revoked) {
    const code = status.revoked.revocationReason?.reason;
    return { status: "revoked", at: status.revoked.revocationTime, source: "", ...(code !== undefined ? { reason: reasonName(Number(code)) } : {}) };
  }
  if (status.good !== undefined) return { status: "good" };
  return { status: "unknown", why: "the responder does not know the certificate" };
}

/** The key that must have signed a response: the issuer's own, or a delegated responder's from the response. */
function responderKey(
  basic: BasicOCSPResponse,
  issuer: { parsed: x509.X509Certificate; key: KeyObject },
  now: Date,
): { key: KeyObject; name: string } | { why: string } {
  const id = basic.tbsResponseData.responderID;
  const names = (cert: x509.X509Certificate) =>
    id.byName
      ? Buffer.from(AsnConvert.serialize(id.byName)).equals(Buffer.from(cert.subjectName.toArrayBuffer()))
      : id.byKey !== undefined &&
        createHash("sha1")
          .update(new Uint8Array(subjectPublicKeyBits(cert)))
          .digest()
          .equals(Buffer.from(id.byKey.buffer));
  if (names(issuer.parsed)) return { key: issuer.key, name: "the issuer" };
  return delegatedResponder(basic, issuer, now, names);
}

function delegatedResponder(
  basic: BasicOCSPResponse,
  issuer: { parsed: x509.X509Certificate; key: KeyObject },
  now: Date,
  names: (cert: x509.X509Certificate) => boolean,
): { key: KeyObject; name: string } | { why: string } {
  for (const asn of basic.certs ?? []) {
    const der = new Uint8Array(AsnConvert.serialize(asn));
    const responder = new x509.X509Certificate(der);
    if (!names(responder)) continue;
    const subject = describeSubject(responder);
    const tbs = AsnConvert.parse(der, Certificate);
    const issuedByIssuer =
      Buffer.from(responder.issuerName.toArrayBuffer()).equals(Buffer.from(issuer.parsed.subjectName.toArrayBuffer())) &&
      signatureVerifies(tbs.signatureAlgorithm, issuer.key, new Uint8Array(AsnConvert.serialize(tbs.tbsCertificate)), new Uint8Array(tbs.signatureValue));
    if (!issuedByIssuer) return { why: `the responder ${subject} is not issued by the certificate's issuer` };
    const eku = responder.getExtension(x509.ExtendedKeyUsageExtension);
    if (!eku?.usages.map(String).includes(id_kp_OCSPSigning))
      return { why: `the responder ${subject} is not authorised to sign OCSP responses (no OCSPSigning usage)` };
    if (responder.notBefore.getTime() > now.getTime() + SKEW_MS || responder.notAfter.getTime() < now.getTime() - SKEW_MS)
      return { why: `the responder ${subject} is not valid now` };
    return { key: publicKeyOf(der), name: `the responder ${subject}` };
  }
  return { why: "the response is signed by neither the issuer nor a responder certificate it carries" };
}

/**
 * A CRL for `cert`: issued and signed by the certificate's issuer, a complete (base) CRL, current at `now`; the
 * certificate revoked when it lists its serial number (removeFromCRL: not revoked).
 */
export async function judgeCrl(
  der: Uint8Array,
  cert: x509.X509Certificate,
  issuer: { parsed: x509.X509Certificate; key: KeyObject },
  now: Date,
): Promise<CertificateStatus> {
  let crl: x509.X509Crl;
  try {
    crl = new x509.X509Crl(new Uint8Array(der));
  } catch (e) {
    return { status: "unknown", why: `the CRL cannot be read: ${(e as Error).message}` };
  }
  if (!Buffer.from(crl.issuerName.toArrayBuffer()).equals(Buffer.from(issuer.parsed.subjectName.toArrayBuffer())))
    return { status: "unknown", why: `the CRL is issued by ${crl.issuer}, not by the certificate's issuer` };
  if (!(await crl.verify({ publicKey: issuer.parsed.publicKey }, globalThis.crypto)))
    return { status: "unknown", why: "the CRL's signature does not verify with the issuer's key" };
  if (crl.getExtension(DELTA_CRL_INDICATOR)) return { status: "unknown", why: "it is a delta CRL, not a complete one" };
  // RFC 5280 requires a next update; @peculiar/asn1-x509 also reads no revoked entry from a CRL without one, so such a
  // CRL would say every certificate is good.
  if (!crl.nextUpdate) return { status: "unknown", why: "the CRL has no next update (RFC 5280 requires one)" };
  if (crl.thisUpdate.getTime() > now.getTime() + SKEW_MS) return { status: "unknown", why: `the CRL is from the future (${crl.thisUpdate.toISOString()})` };
  if (crl.nextUpdate && crl.nextUpdate.getTime() < now.getTime() - SKEW_MS)
    return { status: "unknown", why: `the CRL is out of date (next update ${crl.nextUpdate.toISOString()})` };
  const entry = crl.findRevoked(cert.serialNumber);
  if (!entry || entry.reason === x509.X509CrlReason.removeFromCRL) return { status: "good" };
  return {
    status: "revoked",
    at: entry.invalidity ?? entry.revocationDate,
    source: "",
    ...(entry.reason !== undefined ? { reason: reasonName(entry.reason) } : {}),
  };
}

const DELTA_CRL_INDICATOR = "2.5.29.27";

const REASONS = [
  "unspecified",
  "keyCompromise",
  "cACompromise",
  "affiliationChanged",
  "superseded",
  "cessationOfOperation",
  "certificateHold",
  "",
  "removeFromCRL",
  "privilegeWithdrawn",
  "aACompromise",
];

function reasonName(code: number): string {
  return REASONS[code] || `code ${code}`;
}

/** Signature algorithms a responder may sign with: RSA PKCS#1 v1.5 and ECDSA over SHA-2, and Ed25519. */
const SIGNATURE_ALGORITHMS: Record<string, { hash: string | null; ecdsa?: boolean }> = {
  "1.2.840.113549.1.1.11": { hash: "sha256" },
  "1.2.840.113549.1.1.12": { hash: "sha384" },
  "1.2.840.113549.1.1.13": { hash: "sha512" },
  "1.2.840.10045.4.3.2": { hash: "sha256", ecdsa: true },
  "1.2.840.10045.4.3.3": { hash: "sha384", ecdsa: true },
  "1.2.840.10045.4.3.4": { hash: "sha512", ecdsa: true },
  "1.3.101.112": { hash: null },
};

function signatureVerifies(algorithm: AlgorithmIdentifier, key: KeyObject, data: Uint8Array, signature: Uint8Array): boolean {
  const known = SIGNATURE_ALGORITHMS[algorithm.algorithm];
  if (!known) return false;
  try {
    return verifySignature(known.hash, data, known.ecdsa ? { key, dsaEncoding: "der" } : key, signature);
  } catch {
    return false;
  }
}

function publicKeyOf(der: Uint8Array): KeyObject {
  return new NodeCertificate(der).publicKey;
}

function hexToBytes(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex.length % 2 ? `0${hex}` : hex, "hex"));
}

function stripLeadingZeros(bytes: Uint8Array): Uint8Array {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  return bytes.subarray(i);
}
