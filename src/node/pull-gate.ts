// Verification at pull time: every PullImage the kubelet sends is judged by the same policies the webhook loads,
// through the one pipeline, before the runtime pulls anything. The tag is resolved to a digest with the pull's own
// credentials, the pod in the pull's sandbox (namespace, name, labels) is judged with the image at that digest, and
// an allowed pull is sent on for that digest: the tag cannot move between verification and pull.
//
// Refusals are gRPC statuses the kubelet shows in the pod's events (ErrImagePull). A registry that gives no
// answer is the failure policy's to decide, worded as the webhook words it; it never touches a container that
// already runs, because only pulls pass through here.
import type { Logger } from "pino";
import { allow, renderReason, type Decision, type Violation } from "../core/decision.ts";
import { registryAnswered } from "../core/image-policy/digest-pinning.ts";
import { parseImageReference, type ImageReference } from "../core/image-reference.ts";
import type { RegistryAuth } from "../core/pull-verification/credential-hash.ts";
import { imageAtDigest, podOfPull, pullByDigest, type PullingPod } from "../core/pull-verification/pull-subject.ts";
import type { AuditLog, AuditRecord } from "../audit/audit-log.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { chainLookups } from "../credentials/keyring.ts";
import type { Engine } from "../engine/engine.ts";
import { presentedCredentials } from "./presented-credentials.ts";

/** What the gate says of one pull. */
export type PullVerdict =
  /** Judged and allowed: the runtime pulls `pullAs` (the repository at `digest`). */
  | { outcome: "verified"; pullAs: string; digest: string; decision: Decision }
  /**
   * Allowed without a full judgement, because something gave no answer and the node fails open: the runtime pulls
   * `pullAs` (the digest when the tag resolved, else the image as asked). Never recorded as verified.
   */
  | { outcome: "failed-open"; pullAs: string; digest?: string; reason: string; decision?: Decision }
  /** Refused: the pull fails with `message`. */
  | { outcome: "refused"; message: string; digest?: string; decision?: Decision };

export interface PullRequest {
  /** The image as the kubelet asks for it (the pod spec's reference). */
  image: string;
  auth: RegistryAuth | undefined;
  /**
   * The pod in the pull's sandbox. Absent when the caller names none (containerd's image verifier): the image is
   * then judged as an ImageReview without a namespace is, so no namespaced policy and no pod-scoped match applies.
   */
  pod: PullingPod | undefined;
  /** The digest the runtime already resolved the name to (containerd's image verifier); else the gate resolves it. */
  digest?: string;
}

export interface PullGateOptions {
  /** Built from the node's policy set; online (it resolves tags and fetches signatures). */
  engine: Engine;
  /** What a registry that gives no answer means (--failure-policy Ignore). */
  failOpen: boolean;
  logger: Logger;
  /** How long one pull's judgement may take (default 30 s); the kubelet's own deadline ends it sooner. */
  judgementMs?: number;
  /** Who refuses, at the start of every refusal so the pod's events say it (default "imprimatur node-proxy"). */
  refuser?: string;
  /**
   * The node's audit log: every pull judged is a record there, durably, before the pull goes on. A verdict that
   * allows a pull and cannot be recorded refuses it instead: no pull leaves no trace.
   */
  audit?: AuditLog;
  /** The node's own registry credentials (--authfile), tried after the pull's when its tag is resolved. */
  staticCredentials?: CredentialLookup;
}

export class PullGate {
  private readonly opts: PullGateOptions;

  constructor(opts: PullGateOptions) {
    this.opts = opts;
  }

  /** Judges one pull and records the verdict; `deadline` is the caller's (epoch ms), shortened to the gate's own bound. Never throws. */
  async judge(pull: PullRequest, deadline: number): Promise<PullVerdict> {
    const verdict = await this.verdict(pull, deadline);
    return this.recorded(pull, verdict);
  }

  private async verdict(pull: PullRequest, deadline: number): Promise<PullVerdict> {
    const { engine, logger } = this.opts;
    const until = Math.min(deadline, Date.now() + (this.opts.judgementMs ?? 30_000));
    const parsed = parseImageReference(pull.image);
    if (!parsed.ok) return this.refused(`${JSON.stringify(pull.image)} is not an image reference: ${parsed.error}`);
    const ref = parsed.ref;
    const presented = presentedCredentials(pull.auth, ref.registry);
    let digest = pull.digest ?? ref.digest;
    if (!digest) {
      const resolver = engine.resolver;
      if (!resolver) return this.refused("the node cannot resolve tags (no registry access)");
      const lookup = this.opts.staticCredentials ? chainLookups(presented, this.opts.staticCredentials) : presented;
      const resolved = await resolver.resolve(ref, lookup, until);
      if (!resolved.ok) return this.unresolved(pull, ref, resolved.error, resolved.code);
      digest = resolved.digest;
    }
    const judged = imageAtDigest(ref, digest);
    const reviewed = await engine.review(
      pull.pod
        ? { kind: "object", object: podOfPull(pull.pod, judged), namespace: pull.pod.namespace }
        : { kind: "image-review", spec: { containers: [{ image: judged }] } },
      { endpoint: "pull", deadline: until, dryRun: false, ownCluster: true, presentedCredentials: presented, ...(pull.pod?.uid ? { uid: pull.pod.uid } : {}) },
    );
    const decision = reviewed.decision;
    const pullAs = pullByDigest(ref, digest);
    if (!decision) return { outcome: "verified", pullAs, digest, decision: allow() };
    if (!decision.allowed) return this.refused(renderReason(withoutFields(decision.violations)), digest, decision);
    if (decision.failOpen && decision.failOpen.length > 0) {
      const reason = decision.failOpen.map((f) => f.error).join("; ");
      logger.warn({ image: pull.image, digest, pod: pull.pod, reason }, "pull allowed unverified: a registry gave no answer and the node fails open");
      return { outcome: "failed-open", pullAs, digest, reason, decision };
    }
    // validationActions Warn or Audit at the node: the pull goes on, and the log says what would have refused it.
    if (decision.advisories && decision.advisories.length > 0)
      logger.warn(
        { image: pull.image, digest, pod: pull.pod, wouldRefuse: renderReason(withoutFields(decision.advisories)) },
        "pull allowed; a policy in Warn or Audit would refuse it",
      );
    return { outcome: "verified", pullAs, digest, decision };
  }

  /** A tag that did not resolve: the registry's answer refuses; no answer is the failure policy's to decide. */
  private unresolved(pull: PullRequest, ref: ImageReference, error: string, code: string | undefined): PullVerdict {
    if (registryAnswered(code))
      return this.refused(
        `the tag of ${JSON.stringify(pull.image)} could not be resolved to a digest (${code}: ${error}); that is the registry's answer, not an outage, so it is refused whatever the failure policy`,
      );
    if (this.opts.failOpen) {
      const reason = `the tag of ${JSON.stringify(pull.image)} could not be resolved to a digest (${error}); the node fails open`;
      this.opts.logger.warn({ image: pull.image, pod: pull.pod, registry: ref.registry, reason }, "pull allowed unverified");
      return { outcome: "failed-open", pullAs: pull.image, reason };
    }
    return this.refused(
      `the tag of ${JSON.stringify(pull.image)} could not be resolved to a digest (${error}); refused because the node fails closed. ` +
        `Fix the registry settings, or set --failure-policy Ignore`,
    );
  }

  /** The verdict's audit record, written before the pull goes on; an allowing verdict that cannot be recorded refuses. */
  private async recorded(pull: PullRequest, verdict: PullVerdict): Promise<PullVerdict> {
    const { audit, logger } = this.opts;
    if (!audit) return verdict;
    const record: AuditRecord = {
      time: new Date().toISOString(),
      event: `pull-${verdict.outcome}`,
      image: pull.image,
      ...(verdict.digest ? { digest: verdict.digest } : {}),
      ...(pull.pod ? { namespace: pull.pod.namespace, name: pull.pod.name, uid: pull.pod.uid } : {}),
      ...(verdict.outcome === "refused" ? { reason: verdict.message } : {}),
      ...(verdict.outcome === "failed-open" ? { reason: verdict.reason } : {}),
      ...(verdict.decision?.passes ? { passes: verdict.decision.passes } : {}),
      ...(verdict.decision?.advisories?.length ? { advisories: withoutFields(verdict.decision.advisories) } : {}),
    };
    try {
      await audit.append(record);
      return verdict;
    } catch (e) {
      logger.error({ err: e, image: pull.image, outcome: verdict.outcome }, "the pull could not be recorded in the node's audit log");
      if (verdict.outcome === "refused") return verdict;
      return this.refused(`the pull could not be recorded in the node's audit log (${(e as Error).message}), so it is refused`, verdict.digest);
    }
  }

  private refused(reason: string, digest?: string, decision?: Decision): PullVerdict {
    return {
      outcome: "refused",
      message: `${this.opts.refuser ?? "imprimatur node-proxy"} refused the pull: ${reason}`,
      ...(digest ? { digest } : {}),
      ...(decision ? { decision } : {}),
    };
  }
}

/** The judged manifest's field paths mean nothing to the pod: a pull names no container. */
function withoutFields(violations: readonly Violation[]): Violation[] {
  return violations.map(({ field: _field, ...rest }) => rest);
}
