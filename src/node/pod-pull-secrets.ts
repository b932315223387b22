// The node proxy's optional view of the API (--kubeconfig with the node's identity, --node-name): which pod an
// ImageStatus is for, and the credential hashes of its pull secrets (the pod's own imagePullSecrets, which is what
// the kubelet reads), matched as the kubelet's keyring does (src/kube/pull-secrets.ts, shared with pinning). With it, a pod the records do not cover yet can be
// answered from its Secrets without a pull — which is the only way for imagePullPolicy: Never, whose pods never
// call PullImage.
//
// The pod is found among the pods bound to this node by its annotations: the kubelet passes the pod's own
// annotations plus kubernetes.io/config.* keys it adds; a pod matches when all of its API annotations are there
// with the same values and the rest are the kubelet's, and one of its containers names the image. Pods that match
// alike (identical annotations and image, as a Deployment's pods are) are not told apart: the caller then needs a
// recorded credential in the secrets of every one of them.
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { credentialHash } from "../core/pull-verification/credential-hash.ts";
import type { ImageReference } from "../core/image-reference.ts";
import { CONTAINER_LISTS } from "../core/pod-images.ts";
import { withSignal } from "../kube/api-requests.ts";
import { PullSecretReader } from "../kube/pull-secrets.ts";

const KUBELET_ANNOTATION_PREFIX = "kubernetes.io/config.";
/** More pods alike than this (a huge DaemonSet-like spread on one node is not expected) are not examined. */
const MAX_CANDIDATES = 20;
/** How long a list of the node's pods is reused: a pod is in the API before the kubelet starts it. */
const POD_LIST_TTL_MS = 1_000;

export class PodPullSecrets {
  private readonly api: CoreV1Api;
  private readonly secrets: PullSecretReader;
  private readonly nodeName: string;
  private readonly key: Buffer;
  private readonly logger: Logger;
  private podList: { at: number; pods: Promise<V1Pod[]> } | undefined;

  constructor(opts: { kube: KubeConfig; nodeName: string; key: Buffer; logger: Logger }) {
    this.api = opts.kube.makeApiClient(CoreV1Api);
    this.secrets = new PullSecretReader(opts.kube, { logger: opts.logger });
    this.nodeName = opts.nodeName;
    this.key = opts.key;
    this.logger = opts.logger;
  }

  /**
   * For each pod on the node the call may be for, the credential hashes its pull secrets hold for the image's
   * registry and repository, in the kubelet's order; undefined when no pod matches or the API cannot be read
   * (then the proxy decides without them).
   */
  async credentialHashes(
    annotations: Readonly<Record<string, string>>,
    image: string,
    ref: ImageReference,
    deadline: number,
  ): Promise<Array<{ pod: string; hashes: string[] }> | undefined> {
    const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    let pods: V1Pod[];
    try {
      pods = await this.podsOnNode(signal);
    } catch (e) {
      this.logger.warn({ err: (e as Error).message }, "cannot list the node's pods; deciding without pull secrets");
      return undefined;
    }
    const candidates = pods.filter((p) => sameAnnotations(p.metadata?.annotations ?? {}, annotations) && namesImage(p, image));
    if (candidates.length === 0 || candidates.length > MAX_CANDIDATES) return undefined;
    try {
      return await Promise.all(candidates.map(async (pod) => ({ pod: podName(pod), hashes: await this.hashesOf(pod, ref, signal) })));
    } catch (e) {
      this.logger.warn({ pods: candidates.map(podName), err: (e as Error).message }, "cannot read the pods' pull secrets; deciding without them");
      return undefined;
    }
  }

  private async hashesOf(pod: V1Pod, ref: ImageReference, signal: AbortSignal): Promise<string[]> {
    const credentials = await this.secrets.credentialsFor(
      { namespace: pod.metadata?.namespace ?? "", ...(pod.spec?.imagePullSecrets ? { imagePullSecrets: pod.spec.imagePullSecrets } : {}) },
      signal,
      { podOnly: true },
    );
    return credentials.lookup(ref.registry, ref.repository).map((c) =>
      credentialHash(this.key, {
        username: c.username ?? "",
        password: c.password ?? "",
        auth: "",
        serverAddress: "",
        identityToken: c.identityToken ?? "",
        registryToken: c.registryToken ?? "",
      }),
    );
  }

  private podsOnNode(signal: AbortSignal): Promise<V1Pod[]> {
    const now = Date.now();
    if (!this.podList || now - this.podList.at > POD_LIST_TTL_MS) {
      const pods = this.api.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${this.nodeName}` }, withSignal(signal)).then((list) => list.items);
      this.podList = { at: now, pods };
      pods.catch(() => (this.podList = undefined));
    }
    return this.podList.pods;
  }
}

/** The pod's API annotations are all in the call's, and the call's others are the kubelet's own. */
function sameAnnotations(api: Readonly<Record<string, string>>, call: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(api)) if (call[k] !== v) return false;
  for (const k of Object.keys(call)) if (!(k in api) && !k.startsWith(KUBELET_ANNOTATION_PREFIX)) return false;
  return true;
}

function namesImage(pod: V1Pod, image: string): boolean {
  const spec = pod.spec as Record<string, unknown> | undefined;
  return CONTAINER_LISTS.some((list) => ((spec?.[list] as Array<{ image?: string }> | undefined) ?? []).some((c) => c.image === image));
}

function podName(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;
}
