// What one rotation step (tls-rotation-plan.ts) makes of the Secret's contents: new keys and certificates, the
// CA bundle, the trusted-since record. No API calls: the manager (tls-secret-manager.ts) writes the result, and
// the unit tests run whole rotation timelines through it.
import { X509Certificate } from "node:crypto";
import { createCertificateAuthority, issueCertificate, normalizeHosts } from "./tls-bootstrap.ts";
import {
  caCertificates,
  issuerOf,
  keyMatches,
  SECRET_KEYS,
  type CaCertificate,
  type TlsRotationSettings,
  type TlsSecretView,
  type TlsStep,
} from "./tls-rotation-plan.ts";

export interface TlsSecretContents {
  /** Decoded Secret data. */
  data: Record<string, string>;
  trustedSince: Record<string, number>;
}

export type StepResult =
  /** Write these contents to the Secret. */
  | { write: TlsSecretContents; summary: string }
  /** Write this CA bundle into every webhook's caBundle (the Secret stays as it is). */
  | { publish: string; summary: string };

/**
 * The trust already in place when the Secret has to be made anew (deleted, or its CA unreadable): the CAs every
 * webhook's caBundle holds, and the certificate this replica serves if one of them signed it. A new Secret keeps
 * them, so that the bundle it publishes still trusts the certificates the replicas serve, and the switch to the
 * new CA is the ordinary rotation's (published, then trusted for the propagation time, then used).
 */
export interface TrustInPlace {
  /** Unexpired CA certificates in every webhook's caBundle. */
  cas: CaCertificate[];
  /** The certificate served, when it is valid and one of `cas` signed it. */
  leaf: { certPem: string; keyPem: string } | undefined;
}

export function trustInPlace(webhookBundles: string[], served: { cert: string; key: string } | undefined, now: number): TrustInPlace {
  const [first, ...rest] = webhookBundles.map(caCertificates);
  const cas = (first ?? []).filter((ca) => ca.notAfter > now && rest.every((bundle) => bundle.some((c) => c.fingerprint === ca.fingerprint)));
  const unique = cas.filter((ca, i) => cas.findIndex((c) => c.fingerprint === ca.fingerprint) === i);
  let leaf: TrustInPlace["leaf"];
  if (served !== undefined && keyMatches(served.cert, served.key)) {
    const cert = new X509Certificate(served.cert);
    if (cert.validToDate.getTime() > now && issuerOf(cert, unique) !== undefined) leaf = { certPem: served.cert, keyPem: served.key };
  }
  return { cas: unique, leaf };
}

export async function contentsAfterStep(
  step: Exclude<TlsStep, { action: "wait" }>,
  current: TlsSecretContents,
  view: TlsSecretView | undefined,
  ctx: { now: number; settings: TlsRotationSettings; hosts: string[]; inPlace?: TrustInPlace },
): Promise<StepResult> {
  const { now, settings } = ctx;
  const data = { ...current.data };
  const trustedSince = { ...current.trustedSince };
  switch (step.action) {
    case "create": {
      const ca = await newCa(now, settings);
      const kept = ctx.inPlace?.cas ?? [];
      const leaf = ctx.inPlace?.leaf ?? (await issueLeaf(ca, ctx));
      const fresh = {
        [SECRET_KEYS.caCert]: [ca.certPem, ...kept.map((c) => c.pem)].join(""),
        [SECRET_KEYS.caKey]: ca.keyPem,
        [SECRET_KEYS.cert]: leaf.certPem,
        [SECRET_KEYS.key]: leaf.keyPem,
      };
      const summary =
        kept.length === 0
          ? `created a CA and a serving certificate (${step.reason})`
          : `created a CA beside the ${kept.length} the webhooks' caBundle holds, ${ctx.inPlace?.leaf ? "keeping the serving certificate served" : "and a serving certificate"} (${step.reason})`;
      return { write: { data: fresh, trustedSince: {} }, summary };
    }
    case "add-ca": {
      const ca = await newCa(now, settings);
      const kept = (view?.cas ?? []).filter((c) => c.notAfter > now).map((c) => c.pem);
      data[SECRET_KEYS.caCert] = [ca.certPem, ...kept].join("");
      data[SECRET_KEYS.caKey] = ca.keyPem;
      return { write: { data, trustedSince }, summary: `added a new CA beside ${kept.length} current one(s) (${step.reason})` };
    }
    case "prune-cas": {
      const drop = new Set(step.fingerprints);
      for (const f of drop) delete trustedSince[f];
      data[SECRET_KEYS.caCert] = (view?.cas ?? [])
        .filter((c) => !drop.has(c.fingerprint))
        .map((c) => c.pem)
        .join("");
      return { write: { data, trustedSince }, summary: `removed ${drop.size} expired CA(s) from the bundle` };
    }
    case "publish-ca-bundle":
      return { publish: (view?.cas ?? []).map((c) => c.pem).join(""), summary: `wrote the CA bundle into the webhook configurations (${step.reason})` };
    case "record-trusted": {
      for (const f of step.fingerprints) trustedSince[f] = now;
      return { write: { data, trustedSince }, summary: `recorded ${step.fingerprints.length} CA(s) as trusted by the webhooks` };
    }
    case "issue-leaf": {
      const newest = view!.cas[0]!;
      const leaf = await issueLeaf({ certPem: newest.pem, keyPem: data[SECRET_KEYS.caKey]! }, ctx);
      data[SECRET_KEYS.cert] = leaf.certPem;
      data[SECRET_KEYS.key] = leaf.keyPem;
      return { write: { data, trustedSince }, summary: `issued a serving certificate (${step.reason})` };
    }
  }
}

function newCa(now: number, settings: TlsRotationSettings): Promise<{ certPem: string; keyPem: string }> {
  return createCertificateAuthority(`imprimatur-ca@${Math.floor(now / 1000)}`, { now, validityMs: settings.caValidityMs });
}

function issueLeaf(
  ca: { certPem: string; keyPem: string },
  ctx: { now: number; settings: TlsRotationSettings; hosts: string[] },
): Promise<{ certPem: string; keyPem: string }> {
  const hosts = normalizeHosts(ctx.hosts);
  // Never beyond the CA: the CA leaves the bundle when it expires, and nothing it signed may still be in use then.
  const caNotAfter = new X509Certificate(ca.certPem).validToDate.getTime();
  return issueCertificate(ca, {
    commonName: "imprimatur-webhook",
    dnsNames: hosts.dnsNames,
    ipAddresses: hosts.ipAddresses,
    now: ctx.now,
    notAfter: Math.min(ctx.now + ctx.settings.leafValidityMs, caNotAfter),
  });
}
