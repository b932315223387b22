// `k8s://NAMESPACE/SECRET[/KEY]`: how a policy names key material kept in a Kubernetes Secret (cosign's form),
// read from the API when first needed. One parser for every field that takes one.

export interface SecretRef {
  namespace: string;
  secret: string;
  key: string;
}

/** The reference's parts, with `defaultKey` when it names no key; undefined when it is not of that form. */
export function parseSecretRef(ref: string, defaultKey: string): SecretRef | undefined {
  const m = /^k8s:\/\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)(?:\/([-._a-zA-Z0-9]+))?$/.exec(ref);
  if (!m) return undefined;
  return { namespace: m[1]!, secret: m[3]!, key: m[5] ?? defaultKey };
}
