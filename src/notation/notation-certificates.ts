// The certificate rules of the Notary Project signature specification ("Certificate Requirements") and of its trust
// store and trust policy document: the chain an envelope carries must be one chain (each certificate issued by the
// next, a self-signed root last), each certificate must fit its role (CA, code-signing or time-stamping leaf), the
// chain must end in a certificate the policy trusts, and the leaf's subject must match a trusted identity.
// Signatures between certificates are checked by node:crypto; extensions, names and signature algorithms are read
// with @peculiar/x509 (already the project's X.509 library), which node:crypto does not expose.
import { X509Certificate as NodeCertificate } from "node:crypto";
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { attributeName, type TrustedIdentity } from "../core/image-policy/notary-identities.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type NotationCertificateErrorCode =
  /** The chain is not one chain from the leaf to a self-signed root. */
  | "chain"
  /** A certificate does not fit its role (basic constraints, key usage, extended key usage, key size, algorithm). */
  | "profile"
  /** The chain does not end in a certificate of the trust store. */
  | "untrusted"
  /** The leaf's subject matches none of the trusted identities. */
  | "identity"
  /** A certificate was not valid at the time the signature must be judged at. */
  | "validity";

export class NotationCertificateError extends ImprimaturError<NotationCertificateErrorCode> {}

export type CertificatePurpose = "codeSigning" | "timeStamping";

const OID = {
  codeSigning: "1.3.6.1.5.5.7.3.3",
  timeStamping: "1.3.6.1.5.5.7.3.8",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  clientAuth: "1.3.6.1.5.5.7.3.2",
  emailProtection: "1.3.6.1.5.5.7.3.4",
  ocspSigning: "1.3.6.1.5.5.7.3.9",
  anyExtendedKeyUsage: "2.5.29.37.0",
} as const;

/** Extended key usages a leaf of each purpose must not have (the specification's list and notation's, together). */
const FORBIDDEN_EKU: Record<CertificatePurpose, string[]> = {
  codeSigning: [OID.anyExtendedKeyUsage, OID.serverAuth, OID.clientAuth, OID.emailProtection, OID.timeStamping, OID.ocspSigning],
  timeStamping: [OID.anyExtendedKeyUsage, OID.serverAuth, OID.clientAuth, OID.emailProtection, OID.codeSigning, OID.ocspSigning],
};

/** Key usages a leaf must not have: a signing key signs, and only that. */
const FORBIDDEN_LEAF_KEY_USAGE =
  x509.KeyUsageFlags.keyEncipherment |
  x509.KeyUsageFlags.dataEncipherment |
  x509.KeyUsageFlags.keyAgreement |
  x509.KeyUsageFlags.keyCertSign |
  x509.KeyUsageFlags.cRLSign |
  x509.KeyUsageFlags.encipherOnly |
  x509.KeyUsageFlags.decipherOnly;

/** A chain as read: both views of each certificate, leaf first. */
export interface ReadChain {
  der: Uint8Array[];
  node: NodeCertificate[];
  parsed: x509.X509Certificate[];
}

export function readChain(der: readonly Uint8Array[]): ReadChain {
  if (der.length === 0) throw new NotationCertificateError("chain", "the signature carries no certificate");
  const node: NodeCertificate[] = [];
  const parsed: x509.X509Certificate[] = [];
  der.forEach((d, i) => {
    try {
      node.push(new NodeCertificate(d));
      parsed.push(new x509.X509Certificate(new Uint8Array(d)));
    } catch (e) {
      throw new NotationCertificateError("chain", `certificate ${i} of the chain cannot be read: ${(e as Error).message}`);
    }
  });
  return { der: [...der], node, parsed };
}

/**
 * The chain's shape and each certificate's profile: leaf first, each issued (names and signature) by the next, the
 * last one a self-signed root and no other self-signed; CAs with critical basicConstraints CA:true (and a path length
 * that allows the CAs below) and keyCertSign; the leaf with a critical keyUsage of digitalSignature and nothing a
 * signing key must not do, and an EKU, if any, allowed for its purpose; no SHA-1 signatures; RSA of 2048 bits or
 * more, EC of 256 or more.
 */
export function checkChainProfile(chain: ReadChain, purpose: CertificatePurpose): void {
  const n = chain.node.length;
  const last = n - 1;
  for (let i = 0; i < n; i++) {
    const cert = chain.node[i]!;
    const selfSigned = issuedBy(chain, i, i);
    if (i === last && !selfSigned)
      throw new NotationCertificateError("chain", `the chain does not end in a self-signed root (${cert.subject.replace(/\n/g, ", ")})`);
    if (i < last) {
      if (selfSigned) throw new NotationCertificateError("chain", `certificate ${i} is self-signed but is not the last of the chain`);
      if (!issuedBy(chain, i, i + 1))
        throw new NotationCertificateError("chain", `certificate ${i} is not issued by certificate ${i + 1}: the chain is out of order or incomplete`);
    }
    checkAlgorithmAndKey(chain.parsed[i]!, cert, i);
    if (i === 0) checkLeaf(chain.parsed[0]!, purpose);
    else checkCa(chain.parsed[i]!, i, i - 1);
  }
}

/**
 * Whether certificate `i` names certificate `by` as its issuer (the encoded names, byte for byte) and carries its
 * signature. (node:crypto's checkIssued also demands keyCertSign of the issuer, which a self-signed leaf lacks: the
 * profile checks key usage itself, with a message that says so.)
 */
export function issuedBy(chain: ReadChain, i: number, by: number): boolean {
  const issuerName = Buffer.from(chain.parsed[i]!.issuerName.toArrayBuffer());
  const subjectName = Buffer.from(chain.parsed[by]!.subjectName.toArrayBuffer());
  return issuerName.equals(subjectName) && chain.node[i]!.verify(chain.node[by]!.publicKey);
}

function checkAlgorithmAndKey(cert: x509.X509Certificate, nodeCert: NodeCertificate, index: number): void {
  const hash = (cert.signatureAlgorithm as { hash?: { name?: string } }).hash?.name ?? "";
  if (/^SHA-?1$/i.test(hash)) throw new NotationCertificateError("profile", `certificate ${index} is signed with SHA-1`);
  const algorithm = cert.publicKey.algorithm as { namedCurve?: string };
  const node = nodeCert.publicKey;
  const details = node.asymmetricKeyDetails ?? {};
  if (node.asymmetricKeyType === "rsa" || node.asymmetricKeyType === "rsa-pss") {
    if ((details.modulusLength ?? 0) < 2048)
      throw new NotationCertificateError("profile", `certificate ${index} has an RSA key of ${details.modulusLength} bits (at least 2048)`);
  } else if (node.asymmetricKeyType === "ec") {
    if (!["prime256v1", "secp384r1", "secp521r1"].includes(details.namedCurve ?? ""))
      throw new NotationCertificateError(
        "profile",
        `certificate ${index} has an EC key on ${details.namedCurve ?? algorithm.namedCurve ?? "an unknown curve"} (P-256, P-384 or P-521)`,
      );
  } else throw new NotationCertificateError("profile", `certificate ${index} has a ${node.asymmetricKeyType ?? "unknown"} key (RSA or EC)`);
}

function checkLeaf(cert: x509.X509Certificate, purpose: CertificatePurpose): void {
  const bc = cert.getExtension(x509.BasicConstraintsExtension);
  if (bc?.ca) throw new NotationCertificateError("profile", "the signing certificate is a CA (basicConstraints CA:true)");
  const ku = cert.getExtension(x509.KeyUsagesExtension);
  if (!ku) throw new NotationCertificateError("profile", "the signing certificate has no keyUsage extension");
  if (purpose === "codeSigning" && !ku.critical) throw new NotationCertificateError("profile", "the signing certificate's keyUsage is not marked critical");
  if (!(ku.usages & x509.KeyUsageFlags.digitalSignature))
    throw new NotationCertificateError("profile", "the signing certificate's keyUsage lacks digitalSignature");
  if (ku.usages & FORBIDDEN_LEAF_KEY_USAGE) throw new NotationCertificateError("profile", "the signing certificate's keyUsage allows more than signing");
  const eku = cert.getExtension(x509.ExtendedKeyUsageExtension);
  const usages = (eku?.usages ?? []).map(String);
  if (purpose === "timeStamping") {
    // RFC 3161 section 2.3: exactly one, id-kp-timeStamping, and critical.
    if (!eku || !eku.critical || usages.length !== 1 || usages[0] !== OID.timeStamping)
      throw new NotationCertificateError("profile", "the time-stamping certificate's extendedKeyUsage must be id-kp-timeStamping alone, marked critical");
    return;
  }
  const forbidden = usages.filter((u) => FORBIDDEN_EKU[purpose].includes(u));
  if (forbidden.length > 0)
    throw new NotationCertificateError(
      "profile",
      `the signing certificate's extendedKeyUsage includes ${forbidden.join(", ")}, which a code-signing certificate must not`,
    );
}

function checkCa(cert: x509.X509Certificate, index: number, casBelow: number): void {
  const bc = cert.getExtension(x509.BasicConstraintsExtension);
  if (!bc || !bc.ca || !bc.critical)
    throw new NotationCertificateError("profile", `certificate ${index} issues certificates but has no critical basicConstraints CA:true`);
  if (bc.pathLength !== undefined && bc.pathLength < casBelow)
    throw new NotationCertificateError("profile", `certificate ${index} allows ${bc.pathLength} CAs below it, and the chain has ${casBelow}`);
  const ku = cert.getExtension(x509.KeyUsagesExtension);
  if (!ku || !ku.critical || !(ku.usages & x509.KeyUsageFlags.keyCertSign))
    throw new NotationCertificateError("profile", `certificate ${index} issues certificates but its keyUsage lacks keyCertSign (or is not critical)`);
}

/**
 * Whether the chain ends in the trust store: a certificate of the chain is byte for byte one of the store's (the
 * chain itself was checked link by link: checkChainProfile). The store names what the message calls it.
 */
export function checkTrusted(chain: ReadChain, store: readonly Uint8Array[], storeName: string): void {
  const trusted = new Set(store.map((d) => Buffer.from(d).toString("base64")));
  if (!chain.der.some((d) => trusted.has(Buffer.from(d).toString("base64"))))
    throw new NotationCertificateError(
      "untrusted",
      `no certificate of the chain is in ${storeName}: the chain ends in ${chain.node.at(-1)!.subject.replace(/\n/g, ", ")}`,
    );
}

/** Every certificate of the chain valid from `from` to `to` (one instant when they are equal). */
export function checkValidity(chain: ReadChain, from: Date, to: Date, what: string): void {
  chain.node.forEach((cert, i) => {
    const notBefore = new Date(cert.validFrom);
    const notAfter = new Date(cert.validTo);
    if (from.getTime() < notBefore.getTime() || to.getTime() > notAfter.getTime())
      throw new NotationCertificateError(
        "validity",
        `certificate ${i} (${cert.subject.replace(/\n/g, ", ")}) is valid from ${notBefore.toISOString()} to ${notAfter.toISOString()}, not at ${what}`,
      );
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Trusted identities (parsed with the policy: src/core/image-policy/notary-identities.ts) against the leaf.

/** Whether the leaf's subject has every attribute of the identity, with the same value (order does not matter). */
export function identityMatches(identity: TrustedIdentity, leaf: x509.X509Certificate): boolean {
  const subject = new Map<string, string[]>();
  for (const rdn of leaf.subjectName.toJSON())
    for (const [type, values] of Object.entries(rdn)) {
      const attribute = attributeName(type) ?? type;
      subject.set(attribute, [...(subject.get(attribute) ?? []), ...values]);
    }
  for (const [attribute, value] of identity) if (!(subject.get(attribute) ?? []).includes(value)) return false;
  return true;
}

/** The leaf's subject as notation writes identities, for messages: "C=US, ST=WA, O=Example, CN=Builder". */
export function describeSubject(leaf: x509.X509Certificate): string {
  return leaf.subjectName
    .toJSON()
    .flatMap((rdn) => Object.entries(rdn).map(([type, values]) => `${attributeName(type) ?? type}=${values.join("+")}`))
    .join(", ");
}
