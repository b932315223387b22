// Public keys kept in Kubernetes Secrets (`keyRef: k8s://NAMESPACE/SECRET[/KEY]`, as cosign writes them with
// `generate-key-pair k8s://…`). Read when a verification first needs them; the verifier caches them briefly.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { SecretKeyRef } from "../core/image-policy/attestors.ts";
import { describeApiError, KubeApiError, kubeApiErrorCode, withSignal } from "./api-requests.ts";
import { KubeError } from "./kube-error.ts";

export class SecretKeyReader {
  private readonly api: CoreV1Api;

  constructor(kube: KubeConfig) {
    this.api = kube.makeApiClient(CoreV1Api);
  }

  /** The PEM under `ref.key`; throws KubeApiError with the API's reason (e.g. the missing RBAC rule), or KubeError for a missing key. */
  async read(ref: SecretKeyRef, signal: AbortSignal): Promise<string> {
    let secret;
    try {
      secret = await this.api.readNamespacedSecret({ name: ref.secret, namespace: ref.namespace }, withSignal(signal));
    } catch (e) {
      throw new KubeApiError(kubeApiErrorCode(e, signal), `cannot read secret ${ref.namespace}/${ref.secret}: ${describeApiError(e)}`, { cause: e });
    }
    const data = secret.data?.[ref.key];
    if (data === undefined) throw new KubeError("missing-secret-key", `secret ${ref.namespace}/${ref.secret} has no key ${JSON.stringify(ref.key)}`);
    return Buffer.from(data, "base64").toString("utf8");
  }
}
