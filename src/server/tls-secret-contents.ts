// What one rotation step (tls-rotation-plan.ts) makes of the Secret's contents: new keys and certificates, the
// CA bundle, the trusted-since record. No API calls: the manager (tls-secret-manager.ts) writes the result, and
// the unit tests run whole rotation timelines through it.
import { X509Certificate } from "node:crypto";
import { createCertificateAuthority, issueCertificate, normalizeHosts } from "./tls-bootstrap.ts";
import { SECRET_KEYS, type TlsRotationSettings, type TlsSecretView, type TlsStep } from "./tls-rotation-plan.ts";

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

export async function contentsAfterStep(
  step: Exclude<TlsStep, { action: "wait" }>,
  current: TlsSecretContents,
  view: TlsSecretView | undefined,
  ctx: { now: number; settings: TlsRotationSettings; hosts: string[] },
): Promise<StepResult> {
  const { now, settings } = ctx;
  const data = { ...current.data };
  const trustedSince = { ...current.trustedSince };
  switch (step.action) {
    case "create": {
      const ca = await newCa(now, settings);
      const leaf = await issueLeaf(ca, ctx);
      const fresh = { [SECRET_KEYS.caCert]: ca.certPem, [SECRET_KEYS.caKey]: ca.keyPem, [SECRET_KEYS.cert]: leaf.certPem, [SECRET_KEYS.key]: leaf.keyPem };
      return { write: { data: fresh, trustedSince: {} }, summary: `created a CA and a serving certificate (${step.reason})` };
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
