// The node proxy's optional view of the API (--kubeconfig with the node's identity, --node-name): which pods an
// image call may be for, the credential hashes of their pull secrets (the pod's own imagePullSecrets, which is what
// the kubelet reads), matched as the kubelet's keyring does (src/kube/pull-secrets.ts, shared with pinning), and a
// pod's pull policy for an image. With it, a pod the records do not cover yet can be answered from its Secrets
// without a pull — which is the only way for imagePullPolicy: Never, whose pods never call PullImage.
//
// ImageStatus names no pod: it carries only the image and the pod's annotations as the kubelet sees them, which are
// no way to find the pod. The pod's author writes them (kubernetes.io/config.seen and config.source too, which the
// kubelet then replaces with its own values), may change them at any moment (the kubelet's view and this list can
// differ), and a pod whose annotations differ from the call's would drop out, leaving another pod's secrets to
// speak for it. So every pod bound to this node with an image of its spec equal to the call's, once both are
// normalised (the kubelet asks for "repo/app:latest" where the pod says "repo/app"), may be the caller, whatever its
// annotations: the caller needs a recorded credential in the secrets of every one. (PullImage names its pod, and
// pullPolicy finds it by namespace, name and UID.)
//
// That rule holds only if the calling pod is among the candidates, and a pull policy is right only for the pod as
// the kubelet saw it (a container's image may change, and with it which containers pull the image Always), so the
// answer must come from a view at least as new as the call: the kubelet learned of the pod from the API before it
// called. Each answer therefore comes from a consistent read (no resourceVersion: from etcd, not from the
// apiserver's watch cache) that started after the call arrived. ImageStatus: a list of the node's pods; each call
// takes a ticket on arrival, and calls that arrive while a list is in flight share the next one. PullImage: a GET
// of the pod it names (one key in etcd, whatever the size of the cluster), then its UID compared. No such read in
// time: the caller gets undefined, and the proxy reports the image absent (or forwards the pull), so the kubelet
// pulls with the pod's credentials and the registry decides.
//
// Why no informer-fed view (a list+watch kept in memory) answers instead: it may be used for a call only with a
// proof, made after the call arrived, that it holds every change made before; and against the apiserver this
// project builds and tests with (v1.20) no such proof is cheaper than the read itself.
// - The current resourceVersion is cheap to learn (a consistent list of an empty namespace, limit 1: 1.3 ms on
//   loopback), but resourceVersions "must be treated as opaque by clients" (ObjectMeta, v1.20; comparable only
//   from v1.35), so "the watch has reached it" cannot be asked of the API's contract.
// - Even compared as the etcd revisions they are, the watch would seldom reach it in time: that revision moves with
//   every write in the cluster (each node's Lease every 10 s), a watch of this node's pods moves only when they
//   change, and the apiserver sends bookmarks once a minute or 2 s before the watch's timeout, never on request;
//   it does not pass etcd's progress notices on (storage/cacher/cacher.go). A list from the watch cache at that
//   revision waits the same way. The apiserver's consistent list from its cache (ConsistentListFromCache, v1.31)
//   is what does this server-side, and a consistent list gets it from such an apiserver unasked.
// - A proof by equality (a list of only the pods' metadata: each UID and resourceVersion the view must hold, the
//   content then taken from the view) cost what the full list costs: 2.6 ms at p50 for 30 pods for both, as each
//   item's managedFields is about as large as a small pod's spec.
// So the read stays, made cheap: parsed as plain JSON (a typed client took 4.0 ms where this takes 2.6), and for a
// pull one pod instead of a list.
import type { Logger } from "pino";
import { credentialHash } from "../core/pull-verification/credential-hash.ts";
import { effectiveTag, fullName, parseImageReferenceCached, type ImageReference } from "../core/image-reference.ts";
import type { PodRef } from "../core/pull-verification/pull-records.ts";
import { podImages } from "../core/pod-images.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import { PullSecretReader } from "../kube/pull-secrets.ts";

/**
 * More pods naming one image on the node than this are not examined (the image is then reported absent): the
 * kubelet's default --max-pods, so only a node configured for more pods and full of one image's pods reaches it.
 */
const MAX_CANDIDATES = 110;
/** A read of the node's pods (or of one) is abandoned after this long (each caller also has its own deadline). */
const POD_READ_TIMEOUT_MS = 10_000;

export type PullPolicy = "Always" | "IfNotPresent" | "Never";

/** A pod as the API sends it, as far as these answers go. */
interface PodJson {
  metadata?: { namespace?: string; name?: string; uid?: string };
  spec?: Record<string, unknown> & { imagePullSecrets?: Array<{ name?: string }> };
}

/** What the node proxy asks of the API's view of its node (PodPullSecrets; a fake in unit tests). */
export interface NodePodView {
  /** Taken when an ImageStatus arrives: its answer comes from a list of the node's pods that started after this. */
  arrival(): number;
  credentialHashes(arrival: number, image: string, ref: ImageReference, deadline: number): Promise<Array<{ pod: string; hashes: string[] }> | undefined>;
  /** Read when asked, so after the pull arrived. */
  pullPolicy(pod: PodRef, ref: ImageReference, deadline: number): Promise<PullPolicy | undefined>;
}

export class PodPullSecrets implements NodePodView {
  private readonly kube: KubeClient;
  private readonly secrets: PullSecretReader;
  private readonly nodeName: string;
  private readonly key: Buffer;
  private readonly logger: Logger;
  private listsStarted = 0;
  /** The list started last; `number` counts lists started. */
  private latestList: { number: number; pods: Promise<PodJson[]>; settled: boolean } | undefined;
  private queuedList: Promise<PodJson[]> | undefined;

  constructor(opts: { kube: KubeClient; nodeName: string; key: Buffer; logger: Logger }) {
    this.kube = opts.kube;
    this.secrets = new PullSecretReader(opts.kube, { logger: opts.logger });
    this.nodeName = opts.nodeName;
    this.key = opts.key;
    this.logger = opts.logger;
  }

  arrival(): number {
    return this.listsStarted + 1; // the number of the next list to start
  }

  /**
   * For each pod on the node the call may be for (every pod naming the image), the credential hashes its pull
   * secrets hold for the image's registry and repository, in the kubelet's order; undefined when no pod names it or
   * the API cannot be read in time (then the proxy decides without them).
   */
  async credentialHashes(arrival: number, image: string, ref: ImageReference, deadline: number): Promise<Array<{ pod: string; hashes: string[] }> | undefined> {
    const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    const pods = await this.podsSince(arrival, signal);
    if (!pods) return undefined;
    const wanted = fullName(ref);
    const candidates = pods.filter((p) => namesImage(p, wanted));
    if (candidates.length === 0 || candidates.length > MAX_CANDIDATES) return undefined;
    // Pods of one namespace naming the same Secrets (a Deployment's replicas) hold the same credentials: read once.
    const bySecrets = new Map<string, Promise<string[]>>();
    const hashes = (pod: PodJson): Promise<string[]> => {
      const key = JSON.stringify([pod.metadata?.namespace ?? "", (pod.spec?.imagePullSecrets ?? []).map((s) => s.name ?? "")]);
      let found = bySecrets.get(key);
      if (!found) bySecrets.set(key, (found = this.hashesOf(pod, ref, signal)));
      return found;
    };
    try {
      return await Promise.all(candidates.map(async (pod) => ({ pod: podName(pod), hashes: await hashes(pod) })));
    } catch (e) {
      this.logger.warn({ pods: candidates.map(podName), image, err: (e as Error).message }, "cannot read the pods' pull secrets; deciding without them");
      return undefined;
    }
  }

  /**
   * The pull policy of the pod (by namespace, name and UID) for the image, from a consistent read of that pod
   * started now: Always when any of its containers or image volumes naming the image has it. Undefined when the pod
   * or the image is not found or the API cannot be read in time.
   */
  async pullPolicy(pod: PodRef, ref: ImageReference, deadline: number): Promise<PullPolicy | undefined> {
    if (!pod.namespace || !pod.name || !pod.uid) return undefined;
    const signal = AbortSignal.any([AbortSignal.timeout(Math.max(1, deadline - Date.now())), AbortSignal.timeout(POD_READ_TIMEOUT_MS)]);
    let found: PodJson | undefined;
    try {
      // No resourceVersion: read from etcd, not from the apiserver's cache.
      found = (await this.kube.read(`/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}`, { signal })) as
        PodJson | undefined;
    } catch (e) {
      this.logger.warn({ pod, err: (e as Error).message }, "cannot read the pod; deciding without it");
      return undefined;
    }
    if (found?.metadata?.uid !== pod.uid || found.metadata.namespace !== pod.namespace || found.metadata.name !== pod.name) return undefined;
    // Only this node's pods answer for its pulls, as when they came from the list of its pods.
    if (found.spec?.nodeName !== this.nodeName) return undefined;
    const wanted = fullName(ref);
    let policy: PullPolicy | undefined;
    for (const named of podImages(found.spec)) {
      const parsed = parseImageReferenceCached(named.image);
      if (!parsed.ok || fullName(parsed.ref) !== wanted) continue;
      const p = policyAt(found.spec ?? {}, named.field) ?? defaultPullPolicy(parsed.ref);
      if (p === "Always") return p;
      policy ??= p;
    }
    return policy;
  }

  private async hashesOf(pod: PodJson, ref: ImageReference, signal: AbortSignal): Promise<string[]> {
    const credentials = await this.secrets.credentialsFor(
      { namespace: pod.metadata?.namespace ?? "", ...(pod.spec?.imagePullSecrets ? { imagePullSecrets: pod.spec.imagePullSecrets } : {}) },
      signal,
      { podOnly: true },
    );
    // Hashed as the kubelet sends the entry in PullImage's AuthConfig, so it matches the records of its pulls: its
    // keyring keeps only the username and password (an identitytoken or registrytoken in a pull secret never reaches
    // the runtime), and an entry with neither is pulled anonymously, which is recorded for every pod, not hashed.
    return credentials
      .lookup(ref.registry, ref.repository)
      .filter((c) => c.username || c.password)
      .map((c) =>
        credentialHash(this.key, { username: c.username ?? "", password: c.password ?? "", auth: "", serverAddress: "", identityToken: "", registryToken: "" }),
      );
  }

  /** The node's pods from a list that started after `arrival`, or undefined when none comes before `signal`. */
  private async podsSince(arrival: number, signal: AbortSignal): Promise<PodJson[] | undefined> {
    const latest = this.latestList;
    let pods: Promise<PodJson[]>;
    if (latest && latest.number >= arrival) pods = latest.pods;
    else if (!latest || latest.settled) pods = this.startList();
    // One list at a time: calls that arrive meanwhile share the one that starts when it ends.
    else pods = this.queuedList ??= latest.pods.then(this.startQueued, this.startQueued);
    const aborted = new Promise<undefined>((resolve) => {
      if (signal.aborted) resolve(undefined);
      signal.addEventListener("abort", () => resolve(undefined), { once: true });
    });
    return Promise.race([pods.catch(() => undefined), aborted]);
  }

  private readonly startQueued = (): Promise<PodJson[]> => {
    this.queuedList = undefined;
    return this.startList();
  };

  /** A consistent list (no resourceVersion: read from etcd, not from the apiserver's cache). */
  private startList(): Promise<PodJson[]> {
    const number = ++this.listsStarted;
    const pods = this.kube
      .read("/api/v1/pods", { query: { fieldSelector: `spec.nodeName=${this.nodeName}` }, signal: AbortSignal.timeout(POD_READ_TIMEOUT_MS) })
      .then((list) => {
        const items = (list as { items?: unknown } | undefined)?.items;
        if (!Array.isArray(items)) throw new Error("the list of the node's pods has no items");
        return items as PodJson[];
      });
    const list = { number, pods, settled: false };
    this.latestList = list;
    pods.then(
      () => (list.settled = true),
      (e: unknown) => {
        list.settled = true;
        if (this.latestList === list) this.latestList = undefined;
        this.logger.warn({ err: (e as Error).message }, "cannot list the node's pods; deciding without them");
      },
    );
    return pods;
  }
}

/** One of the pod's images (containers and image volumes) is `wanted` (a normalised full name). */
function namesImage(pod: PodJson, wanted: string): boolean {
  return podImages(pod.spec).some((named) => {
    const parsed = parseImageReferenceCached(named.image);
    return parsed.ok && fullName(parsed.ref) === wanted;
  });
}

/** The pull policy beside an image field: "spec.containers[0].image" → imagePullPolicy, an image volume's pullPolicy. */
function policyAt(spec: Record<string, unknown>, field: string): PullPolicy | undefined {
  const m = /^spec\.(\w+)\[(\d+)\]\.image(\.reference)?$/.exec(field);
  if (!m) return undefined;
  const item = (spec[m[1]!] as Array<Record<string, unknown>> | undefined)?.[Number(m[2])];
  const value = m[3] ? (item?.image as Record<string, unknown> | undefined)?.pullPolicy : item?.imagePullPolicy;
  return value === "Always" || value === "IfNotPresent" || value === "Never" ? value : undefined;
}

/** The API's default: Always for :latest (or no tag and no digest), IfNotPresent otherwise. */
function defaultPullPolicy(ref: ImageReference): PullPolicy {
  return effectiveTag(ref) === "latest" ? "Always" : "IfNotPresent";
}

function podName(pod: PodJson): string {
  return `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;
}
