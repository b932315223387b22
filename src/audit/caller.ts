// Who sent a request: the authenticated caller (a kube-apiserver, by client certificate or bearer token) and
// the cluster it speaks for, or a caller that presented nothing. Audit records and decision logs carry it, so a
// record says which cluster's apiserver asked, and a request nobody vouched for is marked as such.

export type CallerAuthentication = "client-certificate" | "token" | "none";

export type Caller =
  | { authentication: "client-certificate" | "token"; name: string; cluster: string }
  /** No credentials were presented (allowed with no --client-ca / --caller-tokens, or with --allow-unauthenticated). */
  | { authentication: "none" };

export const UNAUTHENTICATED: Caller = Object.freeze({ authentication: "none" });

/** The caller's cluster, when it has one. */
export function clusterOf(caller: Caller | undefined): string | undefined {
  return caller && caller.authentication !== "none" ? caller.cluster : undefined;
}

/** The caller as written into audit records and logs. */
export function describeCaller(caller: Caller): Record<string, unknown> {
  return caller.authentication === "none"
    ? { authenticated: false }
    : { authenticated: true, authentication: caller.authentication, name: caller.name, cluster: caller.cluster };
}
