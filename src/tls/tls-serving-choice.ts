// Which certificate a replica of self-managed TLS serves: the one it serves now, or the one the Secret holds. Pure.
//
// kube-apiserver verifies a webhook's certificate with the caBundle of the webhook configuration, so a certificate
// is worth serving only once every webhook's caBundle holds the CA that signed it — as this replica reads the
// configurations back from the API ("observed"), not as the Secret or the leader's plan says. The Secret can hold a
// certificate of a CA the caBundle lacks: after the Secret was deleted or made unreadable and the leader made a
// new CA, or while a leader that is about to publish stalls. Until the bundle that trusts it is observed (and has
// been for the propagation time, so that every apiserver has it too), the replica keeps the certificate it serves.
// Only when that one is no longer usable does a newly observed CA's certificate come in at once; when neither is
// usable, /readyz says why rather than an untrusted certificate being served.

export interface CertificateState {
  notAfter: number;
  /** The key belongs to the certificate. */
  keyMatches: boolean;
  /**
   * Since when (this replica's clock) every webhook's caBundle has held a CA that signed the certificate:
   * -Infinity when no webhook publishes a caBundle (nothing to wait for), undefined when some caBundle lacks it.
   */
  trustedSince: number | undefined;
}

export type ServingChoice = { action: "serve" } | { action: "keep"; reason: string };

/** Whether to swap in `candidate` (the Secret's certificate, differing from the one served) now. */
export function chooseServingCertificate(served: CertificateState | undefined, candidate: CertificateState, now: number, propagationMs: number): ServingChoice {
  if (!candidate.keyMatches) return { action: "keep", reason: "the key does not belong to the certificate" };
  if (candidate.notAfter <= now) return { action: "keep", reason: "the certificate has expired" };
  if (candidate.trustedSince === undefined) return { action: "keep", reason: "the CA that signed it is not in every webhook's caBundle yet" };
  if (servedUsable(served, now) && candidate.trustedSince + propagationMs > now)
    return { action: "keep", reason: `the CA that signed it has been in every webhook's caBundle for less than ${propagationMs} ms` };
  return { action: "serve" };
}

/** The certificate served still works: valid, and signed by a CA every caBundle holds. */
export function servedUsable(served: CertificateState | undefined, now: number): served is CertificateState {
  return served !== undefined && served.notAfter > now && served.trustedSince !== undefined;
}

/**
 * Since when each CA (by fingerprint) has been in every webhook's caBundle, given the fingerprints in every one
 * now: a CA seen before keeps its time, a new one starts now, one no longer in every bundle is forgotten (so that
 * it starts again if it comes back).
 */
export function observeTrustedCas(previous: ReadonlyMap<string, number>, inEveryBundle: Iterable<string>, now: number): Map<string, number> {
  const next = new Map<string, number>();
  for (const fingerprint of inEveryBundle) next.set(fingerprint, previous.get(fingerprint) ?? now);
  return next;
}

/** The fingerprints every bundle holds; undefined when there is no bundle at all (no webhook to trust anything). */
export function fingerprintsInEveryBundle(bundles: readonly (readonly string[])[]): Set<string> | undefined {
  if (bundles.length === 0) return undefined;
  const [first, ...rest] = bundles;
  return new Set(first!.filter((f) => rest.every((b) => b.includes(f))));
}
