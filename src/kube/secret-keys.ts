// Public keys kept in Kubernetes Secrets (`keyRef: k8s://NAMESPACE/SECRET[/KEY]`, as cosign writes them with
// `generate-key-pair k8s://…`). Read when a verification first needs them; the verifier caches them briefly.
import type { SecretKeyRef } from "../core/image-policy/attestors.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import { describeApiError, KubeApiError, kubeApiErrorCode } from "./api-requests.ts";
import type { KubeClient } from "./kube-client.ts";
import { KubeError } from "./kube-error.ts";

export class SecretKeyReader {
  private readonly kube: KubeClient;

  constructor(kube: KubeClient) {
    this.kube = kube;
  }

  /** The PEM under `ref.key`; throws KubeApiError with the API's reason (e.g. the missing RBAC rule), or KubeError for a missing key. */
  async read(ref: SecretKeyRef, signal: AbortSignal): Promise<string> {
    let secret: unknown;
    try {
      secret = await this.kube.request("GET", `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/secrets/${encodeURIComponent(ref.secret)}`, {
        signal,
      });
    } catch (e) {
      throw new KubeApiError(kubeApiErrorCode(e, signal), `cannot read secret ${ref.namespace}/${ref.secret}: ${describeApiError(e)}`, { cause: e });
    }
    const data = asObject(asObject(secret)?.data)?.[ref.key];
    if (typeof data !== "string") throw new KubeError("missing-secret-key", `secret ${ref.namespace}/${ref.secret} has no key ${JSON.stringify(ref.key)}`);
    return Buffer.from(data, "base64").toString("utf8");
  }
}
