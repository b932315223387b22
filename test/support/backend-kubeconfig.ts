// The kubeconfig of an ImageReview backend, as `serve --config` reads it for a remote backend and the apiserver's
// ImagePolicyWebhook reads it for imprimatur: one cluster (the backend's URL, and how its certificate is checked),
// one user (the credentials sent) and the context joining them.
import { stringify } from "yaml";

export interface BackendKubeconfig {
  /** The URL the ImageReview is POSTed to. */
  server: string;
  /** A CA file (`certificate-authority`; a relative path is read from the kubeconfig's folder). */
  caFile?: string;
  /** A CA's PEM, written inline (`certificate-authority-data`). */
  caPem?: string;
  /** `insecure-skip-tls-verify`: the server's certificate is not checked. */
  insecure?: boolean;
  /** The user's credentials, e.g. `{ token }`. Default: none. */
  user?: Record<string, string>;
}

/** The kubeconfig as YAML text. */
export function backendKubeconfig(b: BackendKubeconfig): string {
  const cluster = {
    server: b.server,
    ...(b.caFile !== undefined ? { "certificate-authority": b.caFile } : {}),
    ...(b.caPem !== undefined ? { "certificate-authority-data": Buffer.from(b.caPem).toString("base64") } : {}),
    ...(b.insecure ? { "insecure-skip-tls-verify": true } : {}),
  };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "backend", cluster }],
    users: [{ name: "imprimatur", user: b.user ?? {} }],
    contexts: [{ name: "backend", context: { cluster: "backend", user: "imprimatur" } }],
    "current-context": "backend",
  });
}
