// Certificates for Notary Project signatures in tests: a root CA, an intermediate, and code-signing or time-stamping
// leaves as the specification's certificate profile describes them, each overridable so that a test can break one
// rule at a time (a missing EKU, a leaf that is a CA, an expired certificate, a 1024-bit key).
import { createPrivateKey, generateKeyPairSync, randomBytes, type KeyObject } from "node:crypto";
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(globalThis.crypto);

export type TestKeyType = "ec-p256" | "ec-p384" | "ec-p521" | "rsa-2048" | "rsa-3072" | "rsa-4096" | "rsa-1024";

export interface TestCertificate {
  /** DER of the certificate. */
  der: Uint8Array;
  pem: string;
  /** The private key (node:crypto), for signing envelopes or issuing certificates. */
  privateKey: KeyObject;
  keyType: TestKeyType;
  cert: x509.X509Certificate;
}

export interface CertificateOptions {
  /** Subject as an RFC 4514-like string in @peculiar/x509's order: "C=US, ST=WA, O=Example, CN=Builder". */
  subject: string;
  keyType?: TestKeyType;
  notBefore?: Date;
  notAfter?: Date;
  /** basicConstraints: CA (with an optional pathLen), not a CA, or no extension. Default: CA for CAs, not for leaves. */
  basicConstraints?: { ca: boolean; pathLength?: number; critical?: boolean } | "absent";
  /** keyUsage flags (x509.KeyUsageFlags) and whether critical; "absent": none. */
  keyUsage?: { flags: number; critical?: boolean } | "absent";
  /** extendedKeyUsage OIDs; "absent": none. */
  extendedKeyUsage?: { usages: string[]; critical?: boolean } | "absent";
  /**
   * OCSP responder URLs: an Authority Information Access extension (non-critical) with one id-ad-ocsp access
   * description per URL, in order. Default: no extension.
   */
  ocspUrls?: string[];
  /**
   * CRL locations: a CRL Distribution Points extension (non-critical) with one distribution point per URL, each a
   * fullName of one URI, in order. Default: no extension.
   */
  crlUrls?: string[];
  /** The id-pkix-ocsp-nocheck extension (non-critical, NULL value), as a delegated OCSP responder's certificate has. */
  ocspNoCheck?: boolean;
}

const HOUR = 3_600_000;
export const CODE_SIGNING = "1.3.6.1.5.5.7.3.3";
export const TIME_STAMPING = "1.3.6.1.5.5.7.3.8";
export const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
/** id-kp-OCSPSigning: the EKU of a delegated OCSP responder's certificate (RFC 6960 section 4.2.2.2). */
export const OCSP_SIGNING = "1.3.6.1.5.5.7.3.9";
/** id-pkix-ocsp-nocheck (RFC 6960 section 4.2.2.2.1). */
export const OCSP_NOCHECK = "1.3.6.1.5.5.7.48.1.5";

// Serial numbers: 16 random bytes whose first is 0x01-0x7f, so every serial is positive, DER needs no leading zero
// byte, and all have 32 hex digits; those already given out in this process are never given again (OCSP and CRLs
// name a certificate by its issuer and serial, so two certificates of one issuer must not share one).
const usedSerials = new Set<string>();
function newSerialNumber(): string {
  for (;;) {
    const bytes = randomBytes(16);
    bytes[0] = (bytes[0]! % 0x7f) + 1;
    const hex = bytes.toString("hex");
    if (!usedSerials.has(hex)) {
      usedSerials.add(hex);
      return hex;
    }
  }
}

function generate(keyType: TestKeyType): { privateKey: KeyObject; publicKey: KeyObject } {
  if (keyType.startsWith("rsa-")) return generateKeyPairSync("rsa", { modulusLength: Number(keyType.slice(4)) });
  const curve = keyType === "ec-p256" ? "prime256v1" : keyType === "ec-p384" ? "secp384r1" : "secp521r1";
  return generateKeyPairSync("ec", { namedCurve: curve });
}

/** WebCrypto parameters for signing with a key of this type (the certificate's own signature). */
export function signingAlgorithmOf(keyType: TestKeyType): Algorithm {
  if (keyType.startsWith("rsa-")) return { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as Algorithm;
  return { name: "ECDSA", hash: keyType === "ec-p256" ? "SHA-256" : keyType === "ec-p384" ? "SHA-384" : "SHA-512" } as Algorithm;
}

export async function toWebCrypto(key: KeyObject, keyType: TestKeyType, usage: "sign" | "verify"): Promise<CryptoKey> {
  const rsa = keyType.startsWith("rsa-");
  const params = rsa
    ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
    : { name: "ECDSA", namedCurve: keyType === "ec-p256" ? "P-256" : keyType === "ec-p384" ? "P-384" : "P-521" };
  if (usage === "sign") return globalThis.crypto.subtle.importKey("pkcs8", key.export({ type: "pkcs8", format: "der" }), params, true, ["sign"]);
  return globalThis.crypto.subtle.importKey("spki", key.export({ type: "spki", format: "der" }), params, true, ["verify"]);
}

function extensionsOf(opts: CertificateOptions, isCa: boolean): x509.Extension[] {
  const out: x509.Extension[] = [];
  const bc = opts.basicConstraints ?? { ca: isCa, critical: true };
  if (bc !== "absent") out.push(new x509.BasicConstraintsExtension(bc.ca, bc.pathLength, bc.critical ?? true));
  const ku =
    opts.keyUsage ??
    (isCa
      ? { flags: x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, critical: true }
      : { flags: x509.KeyUsageFlags.digitalSignature, critical: true });
  if (ku !== "absent") out.push(new x509.KeyUsagesExtension(ku.flags, ku.critical ?? true));
  const eku = opts.extendedKeyUsage ?? (isCa ? "absent" : { usages: [CODE_SIGNING], critical: false });
  if (eku !== "absent") out.push(new x509.ExtendedKeyUsageExtension(eku.usages, eku.critical ?? false));
  if (opts.ocspUrls !== undefined && opts.ocspUrls.length > 0) out.push(new x509.AuthorityInfoAccessExtension({ ocsp: opts.ocspUrls }, false));
  if (opts.crlUrls !== undefined && opts.crlUrls.length > 0) out.push(new x509.CRLDistributionPointsExtension(opts.crlUrls, false));
  // The extension's value is an ASN.1 NULL (05 00).
  if (opts.ocspNoCheck === true) out.push(new x509.Extension(OCSP_NOCHECK, false, new Uint8Array([0x05, 0x00])));
  return out;
}

async function finish(cert: x509.X509Certificate, privateKey: KeyObject, keyType: TestKeyType): Promise<TestCertificate> {
  return { der: new Uint8Array(cert.rawData), pem: cert.toString("pem") + "\n", privateKey, keyType, cert };
}

/** A self-signed root CA (or, with the leaf's extensions given in `opts`, a self-signed leaf). */
export async function createRoot(opts: CertificateOptions & { isCa?: boolean }): Promise<TestCertificate> {
  const keyType = opts.keyType ?? "ec-p256";
  const pair = generate(keyType);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: newSerialNumber(),
    name: opts.subject,
    keys: { privateKey: await toWebCrypto(pair.privateKey, keyType, "sign"), publicKey: await toWebCrypto(pair.publicKey, keyType, "verify") },
    notBefore: opts.notBefore ?? new Date(now - HOUR),
    notAfter: opts.notAfter ?? new Date(now + 365 * 24 * HOUR),
    signingAlgorithm: signingAlgorithmOf(keyType),
    extensions: extensionsOf(opts, opts.isCa ?? true),
  });
  return finish(cert, pair.privateKey, keyType);
}

/** A certificate issued by `issuer`: a CA when `isCa`, else a code-signing leaf unless `opts` says otherwise. */
export async function issue(issuer: TestCertificate, opts: CertificateOptions & { isCa?: boolean }): Promise<TestCertificate> {
  const keyType = opts.keyType ?? "ec-p256";
  const pair = generate(keyType);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: newSerialNumber(),
    subject: opts.subject,
    issuer: issuer.cert.subjectName,
    publicKey: await toWebCrypto(pair.publicKey, keyType, "verify"),
    signingKey: await toWebCrypto(issuer.privateKey, issuer.keyType, "sign"),
    signingAlgorithm: signingAlgorithmOf(issuer.keyType),
    notBefore: opts.notBefore ?? new Date(now - HOUR),
    notAfter: opts.notAfter ?? new Date(now + 30 * 24 * HOUR),
    extensions: extensionsOf(opts, opts.isCa ?? false),
  });
  return finish(cert, pair.privateKey, keyType);
}

/** Root → intermediate → code-signing leaf, all defaults; the chain as an envelope carries it (leaf first). */
export async function codeSigningChain(leafSubject = "C=US, ST=WA, L=Seattle, O=Example, CN=Builder", keyType: TestKeyType = "ec-p256") {
  const root = await createRoot({ subject: "C=US, ST=WA, O=Example, CN=Example Root" });
  const intermediate = await issue(root, {
    subject: "C=US, ST=WA, O=Example, CN=Example Signing CA",
    isCa: true,
    basicConstraints: { ca: true, pathLength: 0 },
  });
  const leaf = await issue(intermediate, { subject: leafSubject, keyType });
  return { root, intermediate, leaf, chain: [leaf.der, intermediate.der, root.der] };
}

/** A PEM private key as node:crypto reads it (for signers that take PEM). */
export function privateKeyPem(cert: TestCertificate): string {
  return createPrivateKey(cert.privateKey.export({ type: "pkcs8", format: "pem" }))
    .export({ type: "pkcs8", format: "pem" })
    .toString();
}
