// `serve --client-ca FILE` needs to know which of the CA's certificates are callers: the CA may sign far more than
// kube-apiservers' client certificates (a cluster CA signs every kubelet's), and each would otherwise be let in. So
// the callers are named (--client-ca-allowed-names, matched against the subject CN, as kube-apiserver's
// --requestheader-allowed-names is), or the operator says the CA is dedicated to the callers (--client-ca-any-name).
// Without either serve refuses to start: a warning would leave every node a caller.

export interface ClientCaFlags {
  "client-ca"?: string | undefined;
  "client-ca-allowed-names"?: string[] | undefined;
  "client-ca-any-name"?: boolean | undefined;
}

/** The allowed caller names (undefined: any name), or the problem with the flags, naming them. */
export function clientCaAllowedNames(flags: ClientCaFlags): { allowedNames: string[] | undefined } | { problem: string } {
  const given = flags["client-ca-allowed-names"] ?? [];
  const anyName = flags["client-ca-any-name"] === true;
  if (flags["client-ca"] === undefined) {
    if (given.length > 0) return { problem: "--client-ca-allowed-names needs --client-ca" };
    if (anyName) return { problem: "--client-ca-any-name needs --client-ca" };
    return { allowedNames: undefined };
  }
  if (given.length > 0 && anyName) return { problem: "--client-ca-allowed-names and --client-ca-any-name exclude each other" };
  if (anyName) return { allowedNames: undefined };
  if (given.length === 0) {
    return {
      problem:
        "--client-ca lets in any certificate its CA issues (a cluster CA signs every kubelet's): name the callers with --client-ca-allowed-names NAME " +
        "(their certificates' common name, repeatable), or give --client-ca-any-name if this CA issues certificates for the webhook's callers only",
    };
  }
  // Comma-separated as well, as kube-apiserver's list flags are written.
  const names: string[] = [];
  for (const value of given) {
    const parts = value.split(",").map((part) => part.trim());
    if (parts.some((part) => part === "")) return { problem: `--client-ca-allowed-names: an empty name in ${JSON.stringify(value)}` };
    names.push(...parts);
  }
  return { allowedNames: names };
}
