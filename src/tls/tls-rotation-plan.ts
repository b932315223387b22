// The pure core of self-managed TLS: given what the shared Secret holds, what the webhook configurations trust and
// the time, the one next step. The leader (tls-secret-manager.ts) does the step, reads everything again and asks
// again, until the answer is to wait.
//
// The order is what makes a rotation fail no admission: a new CA is first added to the webhooks' caBundle beside
// the old one; only once that bundle has been in place for `caBundlePropagationMs` is the serving certificate
// switched to one signed by the new CA; the old CA leaves the bundle when it expires (no certificate it signed can
// outlive it: leaves are capped at their issuer's notAfter).
import { createHash, createPrivateKey, X509Certificate } from "node:crypto";
import { parseDuration } from "../core/primitives/duration.ts";
import { normalizeHosts, subjectAltNames } from "./tls-bootstrap.ts";
import { TlsError } from "./tls-error.ts";

export interface TlsRotationSettings {
  /** Lifetime of a new CA. */
  caValidityMs: number;
  /** A new CA is created this long before the newest one expires; the two are trusted side by side meanwhile. */
  caRenewBeforeMs: number;
  /** Lifetime of a serving certificate (capped at its CA's notAfter). */
  leafValidityMs: number;
  /** A serving certificate is re-issued this long before it expires. */
  leafRenewBeforeMs: number;
  /** Time a CA must have been in the webhooks' caBundle before a serving certificate it signed is used. */
  caBundlePropagationMs: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Kyverno's timeline (leaf 150 days, renewed 15 days early; CA a year), with the new CA trusted 30 days ahead. */
export const DEFAULT_TLS_ROTATION: TlsRotationSettings = {
  caValidityMs: 365 * DAY_MS,
  caRenewBeforeMs: 30 * DAY_MS,
  leafValidityMs: 150 * DAY_MS,
  leafRenewBeforeMs: 15 * DAY_MS,
  caBundlePropagationMs: 60_000,
};

/** Why settings cannot give a rotation without gaps, or undefined when they can. */
export function rotationSettingsProblem(s: TlsRotationSettings): string | undefined {
  for (const [name, value] of Object.entries(s)) {
    if (!(Number.isFinite(value) && value >= 0)) return `${name} must be a non-negative duration`;
  }
  if (!(s.caValidityMs > s.caRenewBeforeMs)) return "the CA validity must be longer than its renewal margin";
  if (!(s.leafValidityMs > s.leafRenewBeforeMs)) return "the serving certificate's validity must be longer than its renewal margin";
  // The new CA must be trusted (and propagated) before the leaf signed by the old one is due, or the leaf would be
  // re-issued by a CA that is about to go.
  if (!(s.caRenewBeforeMs > s.leafRenewBeforeMs + s.caBundlePropagationMs))
    return "the CA renewal margin must exceed the serving certificate's renewal margin plus the caBundle propagation time";
  return undefined;
}

export interface CaCertificate {
  pem: string;
  /** SHA-256 of the DER, hex. */
  fingerprint: string;
  notBefore: number;
  notAfter: number;
}

export interface ServingCertificateView {
  notBefore: number;
  notAfter: number;
  /** Fingerprint of the CA in the bundle that signed it, if any. */
  issuer: string | undefined;
  /** The key in the Secret belongs to the certificate. */
  keyMatches: boolean;
  dnsNames: string[];
  ipAddresses: string[];
}

/** The Secret as the planner sees it. */
export interface TlsSecretView {
  /** The trusted CAs (`ca.crt`), newest first. */
  cas: CaCertificate[];
  /** `ca.key` belongs to the newest CA. */
  caKeyMatches: boolean;
  leaf: ServingCertificateView | undefined;
  /** When each CA (by fingerprint) was first seen in every webhook's caBundle (the trusted-since annotation). */
  trustedSince: Record<string, number>;
}

/** The Secret's keys: the kubernetes.io/tls pair plus the CA bundle and the CA key. */
export const SECRET_KEYS = { caCert: "ca.crt", caKey: "ca.key", cert: "tls.crt", key: "tls.key" } as const;
export const TRUSTED_SINCE_ANNOTATION = "imprimatur.dev/ca-trusted-since";

export type TlsStep =
  /** No usable CA: create a CA and a serving certificate together (nothing trusts anything yet). */
  | { action: "create"; reason: string }
  /** Create a CA and put it first in the bundle, keeping the others; the serving certificate stays. */
  | { action: "add-ca"; reason: string }
  /** Drop expired CAs from the bundle. */
  | { action: "prune-cas"; fingerprints: string[] }
  /** Write the Secret's bundle into every webhook's caBundle. */
  | { action: "publish-ca-bundle"; reason: string }
  /** Record that these CAs are now in every webhook's caBundle. */
  | { action: "record-trusted"; fingerprints: string[] }
  /** Issue a serving certificate signed by the newest CA. */
  | { action: "issue-leaf"; reason: string }
  /** Nothing to do before `until` (ms since the epoch). */
  | { action: "wait"; until: number };

export interface TlsPlanInput {
  /** undefined: there is no Secret, or it holds no readable CA. */
  secret: TlsSecretView | undefined;
  /**
   * The caBundle of every webhook in the named configurations, as fingerprint lists; an empty list of webhooks
   * (no configuration installed) publishes nothing and so is never stale.
   */
  webhookBundles: string[][];
  /** DNS names and IPs the serving certificate must cover. */
  hosts: string[];
  now: number;
  settings: TlsRotationSettings;
}

export function planTlsStep(input: TlsPlanInput): TlsStep {
  const { secret, now, settings } = input;
  if (secret === undefined || secret.cas.length === 0) return { action: "create", reason: "no CA yet" };
  const newest = secret.cas[0]!;

  if (!secret.caKeyMatches) return { action: "add-ca", reason: "the CA key is missing or does not belong to the newest CA" };
  if (newest.notAfter - settings.caRenewBeforeMs <= now) return { action: "add-ca", reason: "the newest CA is due for renewal" };

  const expired = secret.cas.filter((ca) => ca.notAfter <= now).map((ca) => ca.fingerprint);
  if (expired.length > 0) return { action: "prune-cas", fingerprints: expired };

  const wanted = new Set(secret.cas.map((ca) => ca.fingerprint));
  const stale = input.webhookBundles.some((bundle) => !sameSet(new Set(bundle), wanted));
  if (stale) return { action: "publish-ca-bundle", reason: "a webhook's caBundle differs from the CAs in the Secret" };

  const untracked = secret.cas.filter((ca) => secret.trustedSince[ca.fingerprint] === undefined).map((ca) => ca.fingerprint);
  if (untracked.length > 0) return { action: "record-trusted", fingerprints: untracked };

  const newestUsableAt = secret.trustedSince[newest.fingerprint]! + settings.caBundlePropagationMs;
  const leafProblem = unusableLeaf(secret, now);
  // An unusable serving certificate is replaced at once: waiting would keep serving nothing that works.
  if (leafProblem !== undefined) return { action: "issue-leaf", reason: leafProblem };
  const leaf = secret.leaf!;

  // Otherwise a new one comes from the newest CA only once kube-apiserver has had time to trust it.
  const leafDueAt = leaf.notAfter - settings.leafRenewBeforeMs;
  const missing = uncoveredHosts(leaf, input.hosts);
  const reason =
    leaf.issuer !== newest.fingerprint
      ? "switching to the newest CA"
      : leafDueAt <= now
        ? "the serving certificate is due for renewal"
        : missing.length > 0
          ? `the serving certificate does not cover ${missing.join(", ")}`
          : undefined;
  if (reason !== undefined) return newestUsableAt <= now ? { action: "issue-leaf", reason } : { action: "wait", until: newestUsableAt };

  const nextExpiry = Math.min(...secret.cas.map((ca) => ca.notAfter));
  return { action: "wait", until: Math.min(leafDueAt, newest.notAfter - settings.caRenewBeforeMs, nextExpiry) };
}

/** Why the serving certificate cannot be served at all, or undefined. */
function unusableLeaf(secret: TlsSecretView, now: number): string | undefined {
  const leaf = secret.leaf;
  if (leaf === undefined) return "no serving certificate yet";
  if (!leaf.keyMatches) return "the serving key does not belong to the serving certificate";
  if (leaf.issuer === undefined) return "the serving certificate was not signed by a CA in the bundle";
  if (leaf.notAfter <= now || leaf.notBefore > now) return "the serving certificate is not valid now";
  return undefined;
}

/** The wanted names (--tls-san and the defaults) the certificate lacks. */
function uncoveredHosts(leaf: ServingCertificateView, hosts: string[]): string[] {
  const wanted = normalizeHosts(hosts);
  const dns = new Set(leaf.dnsNames);
  const ips = new Set(leaf.ipAddresses);
  return [...wanted.dnsNames.filter((n) => !dns.has(n)), ...wanted.ipAddresses.filter((ip) => !ips.has(ip))];
}

function sameSet(a: Set<string>, b: Set<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}

// ---------------------------------------------------------------------------------------------------------------
// Reading the Secret's data (decoded) into the planner's view. Parsing, no I/O.

/** The certificates of a PEM bundle, in order; unreadable blocks are skipped. */
export function parseCertificateBundle(pem: string): CaCertificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const out: CaCertificate[] = [];
  for (const block of blocks) {
    try {
      const cert = new X509Certificate(block);
      out.push({ pem: `${block}\n`, fingerprint: fingerprintOf(cert), notBefore: cert.validFromDate.getTime(), notAfter: cert.validToDate.getTime() });
    } catch {
      // skipped: a block that is not a certificate trusts nothing
    }
  }
  return out;
}

/** Fingerprints of a caBundle, for comparing bundles by content rather than by text. */
export function bundleFingerprints(pem: string): string[] {
  return parseCertificateBundle(pem).map((c) => c.fingerprint);
}

/** The CA certificates of a PEM bundle (a leaf put in a caBundle trusts nothing as a CA). */
export function caCertificates(pem: string): CaCertificate[] {
  return parseCertificateBundle(pem).filter((ca) => isCa(ca.pem));
}

/** The fingerprint of the CA among `cas` that signed `cert`, if any. */
export function issuerOf(cert: X509Certificate, cas: Iterable<CaCertificate>): string | undefined {
  for (const ca of cas) {
    const caCert = new X509Certificate(ca.pem);
    if (cert.checkIssued(caCert) && cert.verify(caCert.publicKey)) return ca.fingerprint;
  }
  return undefined;
}

/** The view of a Secret's decoded data and its trusted-since annotation; undefined when it holds no CA at all. */
export function viewTlsSecret(data: Record<string, string>, trustedSinceAnnotation: string | undefined): TlsSecretView | undefined {
  const cas = caCertificates(data[SECRET_KEYS.caCert] ?? "");
  if (cas.length === 0) return undefined;
  return {
    cas,
    caKeyMatches: keyMatches(cas[0]!.pem, data[SECRET_KEYS.caKey]),
    leaf: viewLeaf(data[SECRET_KEYS.cert], data[SECRET_KEYS.key], cas),
    trustedSince: parseTrustedSince(trustedSinceAnnotation, new Set(cas.map((c) => c.fingerprint))),
  };
}

/** The annotation's map, keeping only well-formed entries for CAs still in the bundle. */
export function parseTrustedSince(text: string | undefined, present: Set<string>): Record<string, number> {
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return {};
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return {};
  const out: Record<string, number> = {};
  for (const [fingerprint, when] of Object.entries(parsed)) {
    const ms = typeof when === "string" ? Date.parse(when) : NaN;
    if (present.has(fingerprint) && Number.isFinite(ms)) out[fingerprint] = ms;
  }
  return out;
}

export function formatTrustedSince(map: Record<string, number>): string {
  const entries = Object.entries(map).map(([fingerprint, ms]) => [fingerprint, new Date(ms).toISOString()]);
  return JSON.stringify(Object.fromEntries(entries));
}

function viewLeaf(certPem: string | undefined, keyPem: string | undefined, cas: CaCertificate[]): ServingCertificateView | undefined {
  if (!certPem) return undefined;
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch {
    return undefined;
  }
  const names = subjectAltNames(certPem);
  return {
    notBefore: cert.validFromDate.getTime(),
    notAfter: cert.validToDate.getTime(),
    issuer: issuerOf(cert, cas),
    keyMatches: keyMatches(certPem, keyPem),
    dnsNames: [...names.dnsNames],
    ipAddresses: [...names.ipAddresses],
  };
}

export function keyMatches(certPem: string, keyPem: string | undefined): boolean {
  if (!keyPem) return false;
  try {
    return new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}

function isCa(pem: string): boolean {
  return new X509Certificate(pem).ca;
}

function fingerprintOf(cert: X509Certificate): string {
  return createHash("sha256").update(cert.raw).digest("hex");
}

/**
 * Lifetimes and renewal margins (serve --tls-timeline; shorter ones rehearse a rotation): `ca=VALIDITY/RENEW_BEFORE,cert=VALIDITY/RENEW_BEFORE,
 * propagation=DUR`, durations as in Go (40s, 1m30s, 8760h). Keys left out keep their defaults.
 */
export function parseRotationTimeline(text: string, base: TlsRotationSettings = DEFAULT_TLS_ROTATION): TlsRotationSettings {
  const out = { ...base };
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const [key, value = ""] = part.split("=", 2) as [string, string?];
    const durations = value.split("/").map((v) => parseDuration(v.trim()));
    if (durations.some((d) => d === undefined)) throw new TlsError("invalid-timeline", `--tls-timeline: not a duration in ${JSON.stringify(part)}`);
    const [first, second] = durations as number[];
    if (key === "ca" && durations.length === 2) [out.caValidityMs, out.caRenewBeforeMs] = [first!, second!];
    else if (key === "cert" && durations.length === 2) [out.leafValidityMs, out.leafRenewBeforeMs] = [first!, second!];
    else if (key === "propagation" && durations.length === 1) out.caBundlePropagationMs = first!;
    else
      throw new TlsError(
        "invalid-timeline",
        `--tls-timeline: expected ca=VALIDITY/RENEW_BEFORE, cert=VALIDITY/RENEW_BEFORE or propagation=DUR, got ${JSON.stringify(part)}`,
      );
  }
  const problem = rotationSettingsProblem(out);
  if (problem !== undefined) throw new TlsError("invalid-timeline", `--tls-timeline: ${problem}`);
  return out;
}
