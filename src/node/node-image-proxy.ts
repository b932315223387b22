// The node proxy's decisions (KEP-2535, "Ensure Secret Pulled Images", for kubelets without it): which pods may
// use an image already on the node, learned from the pulls that went through the proxy.
//
//   ImageStatus from the kubelet's pull decision (it carries the pod's annotations): when the image is present but
//     the policy asks for credentials and neither the records (an anonymous pull: every pod) nor an earlier pull
//     by this pod cover it, the image is reported absent, so the kubelet pulls it with this pod's credentials.
//     Other callers (the kubelet's image-user lookup, crictl, image GC) always get the truth.
//   PullImage: after such a report, a credential already recorded for the image is answered at once from the
//     records (no registry traffic, as the kubelet does for a Secret it knows) — only when the API's view shows
//     that the pod does not pull the image with imagePullPolicy: Always (kubelets before 1.32 send those pulls the
//     same way, and a revoked credential or a moved tag must reach the registry); any other pull goes to the
//     runtime, whose registry decides. A successful pull is recorded: anonymous → every pod, otherwise the
//     credential's keyed hash and the pod. An intent is written before forwarding and removed after the record,
//     so a crash in between leaves an image nobody is recorded for (verify), never one everybody may use.
//   RemoveImage and a periodic ListImages prune the records of images that are gone.
//   With verification at pull time (node-proxy --policies, src/node/pull-gate.ts), every PullImage is judged first:
//     refused, it fails with the reason; allowed, the runtime pulls the verified digest. ImageStatus of a pod's pull
//     decision reports absent an image this pod has not had verified under the policies in force (unless their
//     verdicts hold for every pod and the image's record says so), so the kubelet pulls and the pull is judged; a tag
//     pulled by its digest is found under the tag it was verified as.
//   With API access (optional), a pod the records do not cover is first matched by its own pull secrets, which is
//   the only way a pod with imagePullPolicy: Never (it never pulls) can show credentials: as ImageStatus names no
//   pod, the secrets of every pod on the node naming the image must hold a recorded credential.
import type { Logger } from "pino";
import { LRUCache } from "lru-cache";
import * as grpc from "@grpc/grpc-js";
import { credentialHash, isAnonymous } from "../core/pull-verification/credential-hash.ts";
import { podFingerprint } from "../core/pull-verification/pod-fingerprint.ts";
import { accessibleToAllPods, credentialLessRecord, credentialRecorded, recordPull, type PodRef } from "../core/pull-verification/pull-records.ts";
import { requiresVerification, type AllowlistPattern, type VerificationPolicy } from "../core/pull-verification/verification-policy.ts";
import { parseImageReference, repositoryName, type ImageReference } from "../core/image-reference.ts";
import {
  CriMessageError,
  decodeImageStatusRequest,
  decodeImageStatusResponse,
  decodeListImagesResponse,
  decodePullImageRequest,
  decodePullImageResponse,
  decodeRemoveImageRequest,
  encodeImageStatusRequest,
  encodePullImageResponse,
  IMAGE_ABSENT_RESPONSE,
  pullImageRequestFor,
  LIST_ALL_IMAGES_REQUEST,
  type CriImage,
} from "../cri/cri-messages.ts";
import { CRI_PACKAGES, type CriPackage, type ImageCall, type RuntimeImageClient } from "../cri/image-service-proxy.ts";
import { verifiedForEveryPod } from "../core/pull-verification/verified-records.ts";
import type { ImageCheckResult, NodeMetrics } from "./node-metrics.ts";
import type { PullGate, PullVerdict } from "./pull-gate.ts";
import { NodeProxyError } from "./node-proxy-error.ts";
import type { NodePodView } from "./pod-pull-secrets.ts";
import type { RecordStore } from "./record-store.ts";

export interface NodeImageProxyOptions {
  store: RecordStore;
  runtime: RuntimeImageClient;
  policy: VerificationPolicy;
  allowlist: readonly AllowlistPattern[];
  logger: Logger;
  metrics: NodeMetrics;
  /** How often records of removed images are pruned against the runtime's image list (default 5 minutes). */
  reconcileEveryMs?: number;
  /** The API's view of the node's pods: pods the records do not cover yet are matched by their Secrets. */
  podSecrets?: NodePodView;
  /** Verification at pull time: every pull judged by the policies, and images present used once verified. */
  verification?: PullVerification;
}

/** How images present are treated when pulls are verified (node-proxy --verify-present). */
export type VerifyPresent = "IfNotVerified" | "Never";
export const VERIFY_PRESENT_MODES: readonly VerifyPresent[] = ["IfNotVerified", "Never"];

export interface PullVerification {
  /** What judges each pull (a PullGate). */
  gate: Pick<PullGate, "judge">;
  /**
   * IfNotVerified: an image on the node that the asking pod has not had verified under the policies in force is
   * reported absent, so the kubelet pulls it and the pull is judged. Never: what is on the node is used as it is.
   */
  verifyPresent: VerifyPresent;
  /** The generation of the policies in force, and whether their verdicts hold for every pod (verified-records.ts). */
  policies(): { generation: string; everyPod: boolean };
}

/** An image reported absent to a pod, awaiting that pod's pull. */
interface Hidden {
  imageRef: string;
  repository: string;
}

/** How long a report of absence waits for the pod's pull: the kubelet pulls at once, or backs off and asks again. */
const HIDDEN_TTL_MS = 10 * 60_000;
/** How long a pull's judgement may take (the kubelet's own deadline, 2 minutes by default, ends it sooner). */
const PULL_JUDGEMENT_MS = 60_000;
/** How long an ImageStatus may wait on the API for a pod's pull secrets. */
const SECRETS_DEADLINE_MS = 5_000;

export class NodeImageProxy {
  private readonly opts: NodeImageProxyOptions;
  /** fingerprint + image name → the image hidden from that pod. */
  private readonly hidden = new LRUCache<string, Hidden>({ max: 50_000, ttl: HIDDEN_TTL_MS });
  /** imageRef + repository → fingerprints of pods that showed a recorded credential (or pulled it themselves). */
  private readonly verifiedPods = new LRUCache<string, Set<string>>({ max: 20_000 });
  /** imageRef + pod fingerprint → the policy generation the pod's pull of the image was verified under. */
  private readonly podVerifications = new LRUCache<string, string>({ max: 50_000 });
  /** The CRI package the runtime answered the proxy's own calls in. */
  private ownPackage: CriPackage = "runtime.v1";
  private timer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<Promise<void>>();

  constructor(opts: NodeImageProxyOptions) {
    this.opts = opts;
  }

  /** Every call of both packages comes here; methods the proxy does not look into are forwarded untouched. */
  readonly handle = async (call: ImageCall): Promise<Buffer> => {
    let code = "OK";
    try {
      switch (call.method) {
        case "ImageStatus":
          return await this.imageStatus(call, this.opts.podSecrets?.arrival());
        case "PullImage":
          return await this.pullImage(call);
        case "RemoveImage":
          return await this.removeImage(call);
        default:
          return await call.forward();
      }
    } catch (e) {
      if (e instanceof CriMessageError) {
        code = "INVALID_ARGUMENT";
        throw { code: grpc.status.INVALID_ARGUMENT, details: e.message };
      }
      code = typeof (e as grpc.ServiceError).code === "number" ? grpc.status[(e as grpc.ServiceError).code] : "INTERNAL";
      throw e;
    } finally {
      this.opts.metrics.criCall(call.method, code);
    }
  };

  /**
   * Start-up: on the first run the images already present are recorded as preloaded; intents left by a crash become
   * records that name nobody; records of images that are gone are pruned. Then pruning runs periodically.
   */
  async start(): Promise<void> {
    const { store, logger } = this.opts;
    const listedAt = store.writeTicket();
    const images = await this.listImages();
    // The snapshot is the first start's only write, so a start that fails before it leaves the next one first.
    if (store.snapshot === "due") {
      await store.writePreloaded(images.map((i) => ({ imageRef: i.id, repositories: repositoriesOf(i) })));
      logger.info({ images: images.length }, "first start: the images on the node are recorded as preloaded");
    } else if (store.snapshot === "missing") {
      logger.warn(
        { stateDir: store.dir },
        "no preloaded-image snapshot: the state folder has records of earlier starts but no list of the images on the node before the first; none counts as preloaded, so pods must show credentials for images baked into the node",
      );
    }
    for (const left of await store.leftoverIntents()) {
      if (left.intent) {
        const image = await this.statusOf(left.intent.image);
        if (image) {
          await store.update(image.id, (current) => (current.state === "ok" ? current.record : credentialLessRecord(image.id, new Date())));
          logger.warn(
            { image: left.intent.image, imageRef: image.id },
            "a pull was interrupted; the image is recorded without credentials: every pod must show its own",
          );
        }
      } else logger.warn({ file: left.file, reason: left.reason }, "an unreadable pull intent was dropped");
      await store.dropIntentFile(left.file);
    }
    await this.prune(images, listedAt);
    const every = this.opts.reconcileEveryMs ?? 5 * 60_000;
    this.timer = setInterval(() => void this.reconcile().catch((err: unknown) => logger.warn({ err }, "pruning records failed")), every);
    this.timer.unref();
  }

  /** Stops pruning and waits for records still being written. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await Promise.all([...this.pending]);
  }

  /** Prunes the records of images the runtime no longer has. */
  async reconcile(): Promise<void> {
    const listedAt = this.opts.store.writeTicket();
    await this.prune(await this.listImages(), listedAt);
  }

  /** `arrival`: the API view's ticket, taken when the call arrived. */
  private async imageStatus(call: ImageCall, arrival: number | undefined): Promise<Buffer> {
    const req = decodeImageStatusRequest(call.request);
    const fingerprint = podFingerprint(req.image.annotations);
    let response = await call.forward();
    if (!fingerprint) return this.answered("not-a-pod", response);
    let image = decodeImageStatusResponse(response);
    const verification = this.opts.verification;
    if (verification) {
      const { generation } = verification.policies();
      // A name the proxy pulled by its verified digest: the runtime has the digest but not the name, or the name
      // still on an image pulled before (the tag moved): the image verified is the one to use.
      if (!image || !this.verifiedFor(image.id, fingerprint, generation)) {
        const found = await this.verifiedUnderTag(call, req.image.image, generation);
        if (found) ({ response, image } = found);
      }
      if (image && verification.verifyPresent === "IfNotVerified" && !this.verifiedFor(image.id, fingerprint, generation)) {
        this.opts.logger.debug({ image: req.image.image, imageRef: image.id }, "image reported absent: not verified for this pod under the policies in force");
        return this.answered("not-verified", IMAGE_ABSENT_RESPONSE);
      }
    }
    if (!image) return this.answered("absent", response);
    const parsed = parseImageReference(req.image.image);
    const repository = parsed.ok ? repositoryName(parsed.ref) : undefined;
    let result = this.check(image.id, repository, fingerprint);
    if (
      result === "must-pull" &&
      parsed.ok &&
      arrival !== undefined &&
      (await this.secretsCover(arrival, image.id, parsed.ref, req.image.image, fingerprint, call))
    )
      result = "pod-secrets";
    if (result !== "must-pull" && result !== "unreadable-record") return this.answered(result, response);
    // A name that is not a repository (an image ID) cannot be pulled with credentials either: it stays hidden.
    if (repository) this.hidden.set(hiddenKey(fingerprint, req.image.image), { imageRef: image.id, repository });
    this.opts.logger.debug({ image: req.image.image, imageRef: image.id, result }, "image reported absent: the pod has not shown credentials for it");
    return this.answered(result, IMAGE_ABSENT_RESPONSE);
  }

  /** A tag the proxy pulled by its verified digest: the runtime has the digest, not the tag. Its status, if present. */
  private async verifiedUnderTag(call: ImageCall, name: string, generation: string): Promise<{ response: Buffer; image: CriImage } | undefined> {
    const imageRef = this.opts.store.verifiedAs(name);
    if (!imageRef || this.opts.store.verification(imageRef)?.policyGeneration !== generation) return undefined;
    const response = await call.forward(encodeImageStatusRequest(imageRef));
    const image = decodeImageStatusResponse(response);
    return image ? { response, image } : undefined;
  }

  /** Whether the pod may use the image without a pull being judged: it had it verified, or the verdict holds for every pod. */
  private verifiedFor(imageRef: string, fingerprint: string, generation: string): boolean {
    if (this.podVerifications.get(podVerificationKey(imageRef, fingerprint)) === generation) return true;
    return verifiedForEveryPod(this.opts.store.verification(imageRef), generation);
  }

  private check(imageRef: string, repository: string | undefined, fingerprint: string): ImageCheckResult {
    const { store, policy, allowlist } = this.opts;
    const read = store.get(imageRef);
    if (repository && !requiresVerification(policy, store.isPreloaded(imageRef, repository), repository, allowlist)) return "policy-skip";
    if (read.state === "unreadable") return "unreadable-record";
    if (!repository) return "must-pull";
    if (read.state === "ok" && accessibleToAllPods(read.record, repository)) return "all-pods";
    if (this.verifiedPods.get(coverageKey(imageRef, repository))?.has(fingerprint)) return "pod-verified";
    return "must-pull";
  }

  /** With API access: whether the pull secrets of every pod that may be the caller hold a credential recorded for the image. */
  private async secretsCover(arrival: number, imageRef: string, ref: ImageReference, image: string, fingerprint: string, call: ImageCall): Promise<boolean> {
    const { podSecrets, store, logger } = this.opts;
    const read = store.get(imageRef);
    if (!podSecrets || read.state !== "ok") return false;
    const repository = repositoryName(ref);
    const pods = await podSecrets.credentialHashes(arrival, image, ref, Date.now() + SECRETS_DEADLINE_MS);
    // Whichever of the pods naming the image the call is for (the view holds the caller; the call names none), its
    // secrets must hold a recorded credential. No pod at all proves nothing.
    const covered = pods !== undefined && pods.length > 0 && pods.every((p) => p.hashes.some((h) => credentialRecorded(read.record, repository, h)));
    if (call.signal.aborted || !covered) return false;
    this.cover(imageRef, repository, fingerprint);
    logger.debug({ pods: pods!.map((p) => p.pod), image, imageRef }, "the pull secrets of every pod naming the image hold a credential recorded for it");
    return true;
  }

  private async pullImage(call: ImageCall): Promise<Buffer> {
    const { store, metrics, logger } = this.opts;
    const req = decodePullImageRequest(call.request);
    const image = req.image.image;
    const repository = repositoryOf(image);
    const fingerprint = podFingerprint(req.sandbox?.annotations);
    const pod: PodRef = { namespace: req.sandbox?.metadata?.namespace ?? "", name: req.sandbox?.metadata?.name ?? "", uid: req.sandbox?.metadata?.uid ?? "" };
    const hash = isAnonymous(req.auth) ? undefined : credentialHash(store.key, req.auth!);
    const hidden = fingerprint ? this.hidden.get(hiddenKey(fingerprint, image)) : undefined;
    if (fingerprint) this.hidden.delete(hiddenKey(fingerprint, image));
    const judged = await this.judgePull(req, pod);
    const request = judged && judged.verdict.pullAs !== image ? pullImageRequestFor(call.request, judged.verdict.pullAs) : call.request;
    const afterPull = (imageRef: string) => {
      if (judged) this.verified(judged, image, imageRef, fingerprint);
    };

    if (hidden && hash && repository === hidden.repository) {
      const read = store.get(hidden.imageRef);
      if (
        read.state === "ok" &&
        credentialRecorded(read.record, repository, hash) &&
        (await this.mayAnswerFromRecords(pod, image)) &&
        // Verified: the image on the node must be the digest judged, not what the tag named before.
        (await this.statusOf(judged ? judged.verdict.pullAs : hidden.imageRef))?.id === hidden.imageRef
      ) {
        afterPull(hidden.imageRef);
        // Only who presented the credential changes: written after the answer.
        this.afterAnswer(async () => {
          await store.update(hidden.imageRef, (current) =>
            recordPull(current.state === "ok" ? current.record : undefined, hidden.imageRef, repository, { hash, pod }, new Date()),
          );
        });
        this.cover(hidden.imageRef, repository, fingerprint);
        metrics.pull("answered-from-records");
        logger.debug({ pod, image, imageRef: hidden.imageRef }, "credential already recorded for the image: answered from the records");
        return encodePullImageResponse(hidden.imageRef);
      }
    }

    const intent = store.writeIntent(image);
    let response: Buffer;
    try {
      response = await call.forward(request);
    } catch (e) {
      metrics.pull("forwarded-failed");
      if (hidden) {
        metrics.reuseDenied();
        logger.warn(
          { pod, image, imageRef: hidden.imageRef, reason: (e as grpc.ServiceError).details ?? String(e), credentials: hash ? "presented" : "none" },
          "pod refused an image already on the node: the registry did not accept its credentials",
        );
      }
      await store.removeIntent(image);
      throw e;
    }
    try {
      // The answer lets the kubelet start containers from the image: by then the intent must survive a power loss.
      await intent.durable;
    } catch (e) {
      await store.removeIntent(image);
      logger.error({ pod, image, err: e }, "the pull intent could not be made durable: the pull is reported as failed");
      throw new NodeProxyError("pull-not-recorded", `imprimatur node-proxy could not record the pull of ${image}: ${(e as Error).message}`, { cause: e });
    }
    metrics.pull("forwarded-ok");
    const { imageRef } = decodePullImageResponse(response);
    if (imageRef) afterPull(imageRef);
    if (repository && imageRef) this.cover(imageRef, repository, fingerprint);
    // The record is written, then the intent removed, after the answer: the kubelet does not wait for two more
    // fsyncs. A crash before the record is durable leaves the intent, which the next start turns into a record
    // naming nobody: fail safe, as the intent is there for. A write that keeps failing leaves the intent too.
    this.afterAnswer(async () => {
      if (repository && imageRef) {
        try {
          await withRetries(() =>
            store.update(imageRef, (current) =>
              recordPull(current.state === "ok" ? current.record : undefined, imageRef, repository, hash ? { hash, pod } : undefined, new Date()),
            ),
          );
        } catch (err) {
          store.keepIntent(image);
          logger.error(
            { pod, image, imageRef, err },
            "the pull's record could not be written; its intent stays, and the next start records the image for nobody",
          );
          return;
        }
      }
      await store.removeIntent(image);
    });
    return response;
  }

  /**
   * With verification at pull time: the pull judged, with the policy generation it was judged under. A refusal is
   * thrown as the gRPC status the kubelet shows in the pod's events; undefined without verification.
   */
  private async judgePull(
    req: ReturnType<typeof decodePullImageRequest>,
    pod: PodRef,
  ): Promise<{ verdict: Exclude<PullVerdict, { outcome: "refused" }>; generation: string; everyPod: boolean } | undefined> {
    const verification = this.opts.verification;
    if (!verification) return undefined;
    const { generation, everyPod } = verification.policies();
    // A pull without a sandbox (crictl pull, a runtime's own tooling) names no pod: judged as no pod's.
    const verdict = await verification.gate.judge(
      { image: req.image.image, auth: req.auth, pod: req.sandbox?.metadata ? { ...pod, labels: req.sandbox.labels } : undefined },
      Date.now() + PULL_JUDGEMENT_MS,
    );
    this.opts.metrics.pullVerdict(verdict.outcome);
    if (verdict.outcome === "refused") {
      this.opts.logger.info({ pod, image: req.image.image, digest: verdict.digest, reason: verdict.message }, "pull refused");
      throw { code: grpc.status.PERMISSION_DENIED, details: verdict.message };
    }
    if (verdict.outcome === "verified") this.opts.logger.info({ pod, image: req.image.image, digest: verdict.digest, generation }, "pull verified");
    return { verdict, generation, everyPod };
  }

  /** A pull judged and done: this pod may use the image under that generation; the record is written after the answer. */
  private verified(
    judged: NonNullable<Awaited<ReturnType<NodeImageProxy["judgePull"]>>>,
    image: string,
    imageRef: string,
    fingerprint: string | undefined,
  ): void {
    const { verdict, generation, everyPod } = judged;
    if (verdict.outcome !== "verified") return; // failed open: never recorded as verified
    if (fingerprint) this.podVerifications.set(podVerificationKey(imageRef, fingerprint), generation);
    // In memory before the answer (the kubelet may look for the tag at once), on disk after it.
    const written = this.opts.store.recordVerified({ imageRef, digest: verdict.digest, policyGeneration: generation, everyPod, name: image });
    this.afterAnswer(() => written.then(() => undefined));
  }

  /**
   * Whether the pod's pull may be answered from the records: only when the API's view shows the pod, and none of
   * its containers or image volumes naming the image pulls it Always (the pod read now, after the call arrived).
   * Without the view it cannot be told.
   */
  private async mayAnswerFromRecords(pod: PodRef, image: string): Promise<boolean> {
    const { podSecrets, logger } = this.opts;
    const parsed = parseImageReference(image);
    if (!podSecrets || !parsed.ok || !pod.uid) return false;
    const policy = await podSecrets.pullPolicy(pod, parsed.ref, Date.now() + SECRETS_DEADLINE_MS);
    if (policy === "IfNotPresent" || policy === "Never") return true;
    logger.debug({ pod, image, policy: policy ?? "unknown" }, "pull forwarded to the registry: the pod's pull policy is Always or unknown");
    return false;
  }

  /** Work that follows an answer; stop() waits for it. A failure is logged (the record is then missing: verify). */
  private afterAnswer(work: () => Promise<void>): void {
    const done = work()
      .catch((err: unknown) => this.opts.logger.error({ err }, "writing a pull record failed; pods will have to show credentials again"))
      .finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  private async removeImage(call: ImageCall): Promise<Buffer> {
    const req = decodeRemoveImageRequest(call.request);
    const before = await this.statusOf(req.image.image);
    const response = await call.forward();
    if (before && !(await this.statusOf(before.id))) await this.forget(before.id);
    return response;
  }

  private async prune(images: readonly CriImage[], listedAt: number): Promise<void> {
    const gone = await this.opts.store.prune(new Set(images.map((i) => i.id)), listedAt);
    for (const imageRef of gone) this.forgetCoverage(imageRef);
    if (gone.length > 0) this.opts.logger.info({ imageRefs: gone }, "records of removed images pruned");
  }

  private async forget(imageRef: string): Promise<void> {
    await this.opts.store.remove(imageRef);
    this.forgetCoverage(imageRef);
  }

  private forgetCoverage(imageRef: string): void {
    for (const key of [...this.verifiedPods.keys()]) if (key.startsWith(`${imageRef}\u0000`)) this.verifiedPods.delete(key);
  }

  private cover(imageRef: string, repository: string, fingerprint: string | undefined): void {
    if (!fingerprint) return;
    const key = coverageKey(imageRef, repository);
    const pods = this.verifiedPods.get(key) ?? new Set<string>();
    if (pods.size >= 10_000) pods.clear(); // bounded; a forgotten pod only shows its credentials once more
    pods.add(fingerprint);
    this.verifiedPods.set(key, pods);
  }

  private answered(result: ImageCheckResult, response: Buffer): Buffer {
    this.opts.metrics.imageCheck(result);
    return response;
  }

  /** The runtime's own answer about an image (by name or id), in whichever package it speaks. */
  private async statusOf(image: string): Promise<CriImage | undefined> {
    return decodeImageStatusResponse(await this.ownCall("ImageStatus", encodeImageStatusRequest(image)));
  }

  private async listImages(): Promise<CriImage[]> {
    return decodeListImagesResponse(await this.ownCall("ListImages", LIST_ALL_IMAGES_REQUEST));
  }

  private async ownCall(method: "ImageStatus" | "ListImages", request: Buffer): Promise<Buffer> {
    const deadline = Date.now() + 30_000;
    try {
      return await this.opts.runtime.call(this.ownPackage, method, request, { deadline });
    } catch (e) {
      if ((e as grpc.ServiceError).code !== grpc.status.UNIMPLEMENTED) throw e;
      // A runtime that speaks only the other package (containerd before 1.6 serves only v1alpha2).
      this.ownPackage = CRI_PACKAGES.find((p) => p !== this.ownPackage)!;
      return this.opts.runtime.call(this.ownPackage, method, request, { deadline });
    }
  }
}

/** Waits between attempts to write a record: a full disk or a moment's I/O error may pass. */
const WRITE_RETRY_DELAYS_MS = [100, 400, 1_600];

async function withRetries<T>(attempt: () => Promise<T>): Promise<T> {
  for (const delay of WRITE_RETRY_DELAYS_MS) {
    try {
      return await attempt();
    } catch {
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
  return attempt();
}

/** The normalised repository of an image name (no tag or digest), or undefined for what is not one (an image ID). */
function repositoryOf(image: string): string | undefined {
  const parsed = parseImageReference(image);
  return parsed.ok ? repositoryName(parsed.ref) : undefined;
}

/** The repositories an image has on the node, from its tags and digests. */
function repositoriesOf(image: CriImage): string[] {
  return [...new Set([...image.repoTags, ...image.repoDigests].map(repositoryOf).filter((r): r is string => r !== undefined))];
}

function hiddenKey(fingerprint: string, image: string): string {
  return `${fingerprint}\u0000${image}`;
}

function podVerificationKey(imageRef: string, fingerprint: string): string {
  return `${imageRef}\u0000${fingerprint}`;
}

function coverageKey(imageRef: string, repository: string): string {
  return `${imageRef}\u0000${repository}`;
}
