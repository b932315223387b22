// A `notary` attestor entry (Notary Project signatures), from its schema-valid form to the compiled one: the trust
// stores' certificates read and checked as Notation checks a trust store (a `ca` or `signingAuthority` store holds CA
// or self-signed certificates, a `tsa` store self-signed roots), the trusted identities parsed, the level and the
// timestamp rule defaulted. Field names follow Kyverno's notary attestor (certs, tsaCerts) where it has one, and
// Notation's trust policy (trustedIdentities, level, verifyTimestamp) for the rest. Every problem has its field path.
import { X509Certificate } from "node:crypto";
import { overlappingIdentities, parseTrustedIdentity, type TrustedIdentity } from "./notary-identities.ts";
import { parseSecretRef, type SecretRef } from "./secret-refs.ts";

/** Certificates given inline or read from a file when the policy loads, or named in a Secret and read when needed. */
export type CertificateStore = { der: readonly Uint8Array[] } | { secretRef: SecretRef };

export interface NotaryAttestor {
  type: "notary";
  /** "attestors[0].entries[1]" */
  path: string;
  /** How messages name it: the entry's `name`, or "notary <first certificate's subject>". */
  label: string;
  /** Roots (or intermediates) a notary.x509 signature's chain must reach. */
  ca: CertificateStore;
  /** Roots of signing services (notary.x509.signingAuthority). */
  signingAuthority: CertificateStore;
  /** Roots of the time-stamping authorities whose countersignatures count; empty: none are verified. */
  tsa: CertificateStore;
  /** A TrustRoot named instead of the three stores above (then empty): its Notation stores are used. */
  trustRoot?: string;
  identities: readonly TrustedIdentity[] | "*";
  level: "strict" | "permissive" | "audit";
  verifyTimestamp: "always" | "afterCertExpiry";
  /** OCSP and CRL checks of the signing chain: enforced, logged, or not made (skip, the default). */
  revocation: "skip" | "log" | "enforce";
}

export interface RawNotaryEntry extends RawNotaryStores {
  /** A TrustRoot whose `notation` stores the entry uses instead of its own. */
  trustRoot?: string;
  trustedIdentities?: string[];
  level?: "strict" | "permissive" | "audit";
  verifyTimestamp?: "always" | "afterCertExpiry";
  revocation?: "skip" | "log" | "enforce";
  name?: string;
}

type FieldPath = Array<string | number>;
type FieldError = { path: FieldPath; message: string };
type RelatedFileReader = (relativePath: string) => string;

/** The key a Secret holds certificates under when its reference names none (cert-manager's and Notation's use). */
const DEFAULT_SECRET_KEY = "ca.crt";
const EMPTY: CertificateStore = { der: [] };

/** A notary entry's, or a TrustRoot's, certificate store fields. */
export interface RawNotaryStores {
  certs?: string;
  certsRef?: string;
  signingAuthorityCerts?: string;
  signingAuthorityCertsRef?: string;
  tsaCerts?: string;
  tsaCertsRef?: string;
}

export interface NotaryStoreSet {
  ca: CertificateStore;
  signingAuthority: CertificateStore;
  tsa: CertificateStore;
}

/**
 * The three stores from their fields: inline PEM, a file next to the policy, or (where `secrets` allows) a `k8s://`
 * Secret read when needed. One of certs and signingAuthorityCerts (or their files) is required.
 */
export function compileNotaryStores(
  raw: RawNotaryStores,
  at: FieldPath,
  errors: FieldError[],
  opts: { related?: RelatedFileReader; secrets: boolean; requirement: string },
): NotaryStoreSet {
  const store = (inline: "certs" | "signingAuthorityCerts" | "tsaCerts", purpose: "trust" | "tsa"): CertificateStore => {
    const ref = `${inline}Ref` as const;
    const text = raw[inline];
    const refValue = raw[ref];
    if (text !== undefined && refValue !== undefined) {
      errors.push({ path: [...at, ref], message: `give ${inline} or ${ref}, not both` });
      return EMPTY;
    }
    if (refValue?.startsWith("k8s://")) {
      if (!opts.secrets) {
        errors.push({
          path: [...at, ref],
          message: "give the certificates inline or in a file next to this policy; Secrets are named by a policy's notary entry",
        });
        return EMPTY;
      }
      const secretRef = parseSecretRef(refValue, DEFAULT_SECRET_KEY);
      // Read when a verification needs them, as keys are (src/verification/image-verifier.ts).
      if (!secretRef) errors.push({ path: [...at, ref], message: `${JSON.stringify(refValue)} is not of the form k8s://NAMESPACE/SECRET[/KEY]` });
      return secretRef ? { secretRef } : EMPTY;
    }
    let pem = text;
    let field: FieldPath = [...at, inline];
    if (refValue !== undefined) {
      field = [...at, ref];
      if (!opts.related) {
        errors.push({ path: field, message: "certificate files can only be named by policies loaded from files" });
        return EMPTY;
      }
      try {
        pem = opts.related(refValue);
      } catch (e) {
        errors.push({ path: field, message: `cannot read ${JSON.stringify(refValue)}: ${(e as Error).message}` });
        return EMPTY;
      }
    }
    if (pem === undefined) return EMPTY;
    const read = readStoreCertificates(pem, purpose);
    if ("error" in read) {
      errors.push({ path: field, message: read.error });
      return EMPTY;
    }
    return { der: read.der };
  };
  const stores = { ca: store("certs", "trust"), signingAuthority: store("signingAuthorityCerts", "trust"), tsa: store("tsaCerts", "tsa") };
  const given = (s: keyof RawNotaryStores) => raw[s] !== undefined;
  if (!given("certs") && !given("certsRef") && !given("signingAuthorityCerts") && !given("signingAuthorityCertsRef"))
    errors.push({ path: at, message: opts.requirement });
  return stores;
}

export function compileNotaryEntry(raw: RawNotaryEntry, at: FieldPath, path: string, errors: FieldError[], related?: RelatedFileReader): NotaryAttestor {
  const storeFields = ["certs", "certsRef", "signingAuthorityCerts", "signingAuthorityCertsRef", "tsaCerts", "tsaCertsRef"] as const;
  let stores: NotaryStoreSet = { ca: EMPTY, signingAuthority: EMPTY, tsa: EMPTY };
  if (raw.trustRoot !== undefined) {
    // One place for an entry's certificates: its own fields, or a TrustRoot that holds Notation stores.
    const both = storeFields.find((f) => raw[f] !== undefined);
    if (both) errors.push({ path: [...at, both], message: `give trustRoot or ${both}, not both: the entry's certificates come from one place` });
  } else
    stores = compileNotaryStores(raw, at, errors, {
      related,
      secrets: true,
      requirement:
        "give the certificates signatures must chain to: certs (or certsRef), signingAuthorityCerts (or signingAuthorityCertsRef), or a trustRoot holding them",
    });

  const identities = compileIdentities(raw.trustedIdentities ?? ["*"], [...at, "trustedIdentities"], errors);
  const first = [stores.ca, stores.signingAuthority].flatMap((s) => ("der" in s ? s.der : []))[0];
  const label = `notary ${raw.name ?? (first ? subjectOf(first) : (raw.certsRef ?? raw.signingAuthorityCertsRef ?? (raw.trustRoot ? `trust root ${raw.trustRoot}` : path)))}`;
  return {
    type: "notary",
    path,
    label,
    ...stores,
    ...(raw.trustRoot !== undefined ? { trustRoot: raw.trustRoot } : {}),
    identities,
    level: raw.level ?? "strict",
    verifyTimestamp: raw.verifyTimestamp ?? "always",
    revocation: raw.revocation ?? "skip",
  };
}

function compileIdentities(list: readonly string[], at: FieldPath, errors: FieldError[]): readonly TrustedIdentity[] | "*" {
  if (list.includes("*")) {
    if (list.length > 1) errors.push({ path: at, message: `"*" trusts any subject and must be the only identity` });
    return "*";
  }
  const identities: TrustedIdentity[] = [];
  list.forEach((text, i) => {
    const parsed = parseTrustedIdentity(text);
    if ("error" in parsed) errors.push({ path: [...at, i], message: parsed.error });
    else identities.push(parsed.identity);
  });
  if (identities.length === list.length) {
    const overlap = overlappingIdentities(identities);
    if (overlap)
      errors.push({
        path: [...at, overlap[1]],
        message: `every subject that matches it also matches trustedIdentities[${overlap[0]}], which is broader: keep one of the two`,
      });
  }
  return identities;
}

/**
 * The PEM CERTIFICATE blocks of a store, as Notation accepts them: at least one; in a trust store each a CA or
 * self-signed, in a tsa store each a self-signed root.
 */
export function readStoreCertificates(pem: string, purpose: "trust" | "tsa"): { der: Uint8Array[] } | { error: string } {
  const blocks = [...pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)];
  if (blocks.length === 0) return { error: "no PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)" };
  const der: Uint8Array[] = [];
  for (const [i, block] of blocks.entries()) {
    const bytes = Buffer.from(block[1]!.replace(/\s+/g, ""), "base64");
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(bytes);
    } catch (e) {
      return { error: `certificate ${i} cannot be read: ${(e as Error).message}` };
    }
    const selfSigned = cert.subject === cert.issuer && cert.verify(cert.publicKey);
    if (purpose === "tsa" && !selfSigned)
      return { error: `certificate ${i} (${oneLine(cert.subject)}) is not a self-signed root; a tsa store holds roots only` };
    if (purpose === "trust" && !cert.ca && !selfSigned)
      return { error: `certificate ${i} (${oneLine(cert.subject)}) is neither a CA nor self-signed; give the CA that issues the signing certificates` };
    der.push(new Uint8Array(bytes));
  }
  return { der };
}

function subjectOf(der: Uint8Array): string {
  try {
    return oneLine(new X509Certificate(der).subject);
  } catch {
    return "(unreadable certificate)";
  }
}

function oneLine(subject: string): string {
  return subject.replace(/\n/g, ", ");
}
