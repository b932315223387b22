// The edge around the pure pinning core: which credentials a pod may use (its pull secrets, its service
// account's, then the server's own authfile, which a namespaced policy's pin gets only where lent), resolution
// through the shared DigestResolver, and the decision from src/core/image-policy/digest-pinning.ts. Used by /mutate (pin or
// record) and /imagereview (record).
import type { Logger } from "pino";
import { imagesToPin, pinningDecision, type PinningMode, type PinningOutcome, type Resolution } from "../core/image-policy/digest-pinning.ts";
import type { ImageAt, PodMetadataAt } from "../core/pod-locations.ts";
import type { ImagePolicy } from "../core/image-policy/image-policy.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { lookupForPolicy, type PodCredentials } from "../kube/pod-credentials.ts";
import type { PodPullSecretRefs } from "../kube/pull-secrets.ts";
import type { DigestResolver } from "../registry/digest-resolver.ts";

export interface ImagePinnerOptions {
  policies: () => readonly ImagePolicy[];
  namespaces: NamespaceLabelSource;
  resolver: DigestResolver;
  /** Each pod's registry credentials (pull secrets, then the server's own). */
  credentials: PodCredentials;
  mode: PinningMode;
  failOpen: boolean;
  logger: Logger;
  /** Observability hook (metrics). */
  onOutcome?: (outcome: PinningOutcome, mode: PinningMode) => void;
}

export interface PinRequest {
  namespace: string;
  images: ImageAt[];
  /** Per pod of the object: where to record pins (undefined: nowhere) and whose pull secrets apply. */
  pods: Array<{ metadata: PodMetadataAt | undefined; pullSecrets?: PodPullSecretRefs }>;
  /** The image policies that apply to the request (its cluster's); default: every loaded one. */
  policies?: readonly ImagePolicy[];
}

export class ImagePinner {
  private readonly opts: ImagePinnerOptions;

  constructor(options: ImagePinnerOptions) {
    this.opts = options;
  }

  get mode(): PinningMode {
    return this.opts.mode;
  }

  /** Undefined when no image of the request asks to be pinned (the common, free case). */
  async pin(request: PinRequest, deadline: number, mode: PinningMode = this.opts.mode): Promise<PinningOutcome | undefined> {
    const policies = request.policies ?? this.opts.policies();
    if (!policies.some((p) => p.rules.some((r) => r.digestMutate))) return undefined;
    let namespaceLabels: Record<string, string> | undefined;
    if (policies.some((p) => p.namespaceSelector)) {
      await this.opts.namespaces.prepare?.(request.namespace, deadline);
      namespaceLabels = this.opts.namespaces.labels(request.namespace);
    }
    const targets = imagesToPin(policies, request.namespace, request.images, { ...(namespaceLabels ? { namespaceLabels } : {}) });
    if (targets.length === 0) return undefined;

    const lookups = await Promise.all(request.pods.map((pod) => this.opts.credentials.lookupFor(pod.pullSecrets, deadline)));
    const resolutions: Resolution[] = await Promise.all(
      targets.map(async (t) => {
        const creds = lookups[t.pod] ?? (await this.opts.credentials.lookupFor(undefined, deadline));
        if ("error" in creds) return { ok: false as const, error: creds.error, code: creds.code };
        // A NamespacedImagePolicy's pin gets the server's own credentials only where the registries file lends them.
        return this.opts.resolver.resolve(t.ref, lookupForPolicy(creds, { namespace: t.policyNamespace }), deadline);
      }),
    );
    const outcome = pinningDecision(
      targets,
      resolutions,
      request.pods.map((p) => p.metadata),
      { mode, failOpen: this.opts.failOpen },
    );
    for (const p of outcome.pinned)
      this.opts.logger.info(
        { namespace: request.namespace, field: p.field, image: p.image, digest: p.digest, credentials: p.credentialSource, mode },
        mode === "mutate" ? "image pinned" : "image resolved",
      );
    this.opts.onOutcome?.(outcome, mode);
    for (const f of outcome.failed)
      this.opts.logger.warn(
        { namespace: request.namespace, field: f.target.field, image: f.target.image, error: f.error, failOpen: this.opts.failOpen },
        "tag not resolved",
      );
    return outcome;
  }
}
