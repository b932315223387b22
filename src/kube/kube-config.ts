// Where the Kubernetes API is and how to authenticate to it: a kubeconfig file when one is given,
// else the pod's service account. Nothing else is guessed (no ~/.kube/config, no localhost:8080),
// so a misconfigured server fails loudly instead of talking to the wrong cluster.
import { existsSync } from "node:fs";
import type { KubeConfig } from "@kubernetes/client-node";
import { KubeError } from "./kube-error.ts";
import { PooledKubeConfig } from "./pooled-kube-config.ts";

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Its requests share connections (PooledKubeConfig). */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new PooledKubeConfig();
  if (path !== undefined && path !== "") {
    try {
      kc.loadFromFile(path);
    } catch (err) {
      throw new KubeError("unreadable-kubeconfig", `kubeconfig ${path}: ${describe(err)}`, { cause: err });
    }
    const context = kc.getCurrentContext();
    if (!context) throw new KubeError("no-current-context", `kubeconfig ${path}: no current-context is set`);
    if (!kc.getCurrentCluster()) throw new KubeError("undefined-cluster", `kubeconfig ${path}: current-context "${context}" names no defined cluster`);
    return kc;
  }
  if (process.env.KUBERNETES_SERVICE_HOST) {
    // The library would otherwise fail later, at the first request, with a bare ENOENT.
    for (const file of ["token", "ca.crt"]) {
      if (!existsSync(`${SERVICE_ACCOUNT_DIR}/${file}`)) {
        throw new KubeError(
          "missing-service-account",
          `running in a pod (KUBERNETES_SERVICE_HOST is set) but ${SERVICE_ACCOUNT_DIR}/${file} is missing; ` +
            `mount the service account token (automountServiceAccountToken: true) or give a kubeconfig file`,
        );
      }
    }
    kc.loadFromCluster();
    return kc;
  }
  throw new KubeError(
    "no-kubernetes-api",
    "no Kubernetes API to read namespace labels from: give a kubeconfig file (e.g. --kubeconfig ~/.kube/config), " +
      "or run in a pod with a service account (KUBERNETES_SERVICE_HOST is not set here)",
  );
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
