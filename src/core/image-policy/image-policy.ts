// The ImagePolicy kind, compiled (patterns parsed, defaults filled), and its pure evaluation.
import { allow, capList, deny, moreText, renderReason, type Decision, type Pass, type ValidationAction, type Violation } from "../decision.ts";
import { denies } from "../validation-actions.ts";
import type { ImagePattern } from "../image-pattern.ts";
import { parseImageReferenceCached, type ImageReference } from "../image-reference.ts";
import { describeLabelSelector, matchesLabelSelector, type LabelSelector } from "../label-selector.ts";
import { applyBreakGlass, type BreakGlassAccess, type BreakGlassPolicy } from "../break-glass.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import type { ImagePath } from "../image-paths.ts";
import type { RequestMatch } from "../request-match/request-match.ts";
import { judgeAttestors, leafAttestors, type AttestorSet, type EntryOutcome, type SignerEvidence } from "./attestors.ts";
import type { CompiledCel } from "../conditions/cel-expression.ts";
import type { CompiledConditions } from "../conditions/conditions.ts";
import { verificationKey, verifiedImagesText, type ImageVerification, type VerificationResults } from "../verification-results.ts";
import { CostBudget, evaluateCel } from "../conditions/cel-expression.ts";
import { RUNTIME_COST_BUDGET } from "../conditions/cel-cost-limits.ts";
import { evaluateConditions } from "../conditions/conditions.ts";
import { judgeVerified } from "./verified-judgements.ts";
import { UNKNOWN_NAMESPACE_LABELS_HINT } from "../namespace-labels.ts";

export type ImageAction = "allow" | "deny";

export interface ImageRule {
  /** Position in spec.rules, for messages: "rules[2]". */
  index: number;
  action: ImageAction;
  images: ImagePattern[];
  message?: string;
  /** Allowed images must carry a digest; a tag alone is denied (seed 003's digestVerify). */
  digestVerify?: boolean;
  /** Allowed images are pinned to the digest their tag resolves to by the mutating webhook (digestMutate). */
  digestMutate?: boolean;
  /** Allow only: every set must be satisfied by signatures on the image's digest (verified at the edge). */
  attestors?: AttestorSet[];
  /** Where signatures live when not next to the image (cosign's COSIGN_REPOSITORY). */
  signatureRepository?: { registry: string; repository: string };
  /** Allow only: attestations the image must carry, each verified and checked (image-verification design). */
  attestations?: AttestationCheck[];
  /** Allow only: a CEL check over the verified data, after attestors and attestations pass. */
  validate?: { cel: CompiledCel; message?: string };
  /** What a failure of this rule does; absent: the policy's. */
  validationActions?: readonly ValidationAction[];
  /**
   * Why this allow rule cannot verify (an attestor names a trust root the set does not hold; set when the set
   * loads, src/core/trust-root/trust-root-references.ts): it then denies every image it matches with this reason.
   */
  unverifiable?: string;
}

export interface AttestationCheck {
  /** Position in the rule's attestations, for messages: "attestations[1]". */
  index: number;
  predicateType: string;
  /** Its own attestors, or the rule's. */
  attestors: AttestorSet[];
  conditions?: CompiledConditions;
  cel?: CompiledCel;
  /** all: every verified statement of the type must pass (Kyverno's rule, the default); any: one passing statement per counted signer. */
  statementsMustPass: "all" | "any";
}

export interface ImagePolicy {
  name: string;
  /** Where it was loaded from, for messages and `check`. */
  source?: PolicyOrigin;
  /** Set for a NamespacedImagePolicy: its namespace (its name is then "namespace/name", its namespaces this one). */
  namespace?: string;
  namespaces?: string[];
  namespaceSelector?: LabelSelector;
  /** Clusters it applies to (the callers' cluster names); absent: every cluster. See cluster-scope.ts. */
  clusters?: string[];
  /** Which requests it is for (matchConstraints, matchConditions); absent: every request. See request-match/. */
  match?: RequestMatch;
  /** Image locations in custom resources; they add to the extraction for every image policy. */
  imagePaths?: ImagePath[];
  rules: ImageRule[];
  default: ImageAction;
  defaultMessage?: string;
  /** What a failure does (Deny, Warn, Audit); absent: Deny. A rule may say otherwise. */
  validationActions?: readonly ValidationAction[];
  breakGlass: BreakGlassPolicy;
}

/** What the core needs about one admission: a subset of the ImageReview spec plus field paths. */
export interface ImageRequest {
  namespace: string;
  annotations: Record<string, string>;
  images: Array<{ image: string; field?: string }>;
}

export interface EvaluationContext {
  /** Labels of the request's namespace; undefined when they are not known. */
  namespaceLabels?: Record<string, string>;
  /** Signature verification results (verificationKey → result); absent offline, where signatures go unchecked. */
  verifications?: VerificationResults;
  /** When the registry could not answer a signature lookup: admit (audited) instead of deny. */
  failOpen?: boolean;
  /** The request is an ImageReview, whose answer cannot change the pod (no pinning). */
  imageReview?: boolean;
  /** The admission's time (ms since the epoch), given by the edge: what attestation conditions such as time_since measure to. */
  now?: number;
  /** Who may use break-glass on which policy (asked by the edge); absent: not asked. */
  breakGlassAccess?: BreakGlassAccess;
}

type Applicability = { applies: boolean } | { unknown: Violation };

export function policyApplies(policy: ImagePolicy, namespace: string, ctx: EvaluationContext): Applicability {
  if (policy.namespaces && !policy.namespaces.includes(namespace)) return { applies: false };
  if (policy.namespaceSelector) {
    if (ctx.namespaceLabels === undefined) {
      return {
        unknown: {
          policy: policy.name,
          rule: "namespaceSelector",
          message:
            `the labels of namespace ${JSON.stringify(namespace)} are unknown, so whether this policy applies ` +
            `(selector ${describeLabelSelector(policy.namespaceSelector)}) cannot be decided; ` +
            UNKNOWN_NAMESPACE_LABELS_HINT,
        },
      };
    }
    return { applies: matchesLabelSelector(policy.namespaceSelector, ctx.namespaceLabels) };
  }
  return { applies: true };
}

type RuleMatch = { rule: ImageRule; pattern: ImagePattern };

// Matching is pure, and admissions repeat the same images (parseImageReferenceCached hands out one reference
// object per image string): each policy remembers its answer per reference, for as long as both exist.
const matchesByPolicy = new WeakMap<ImagePolicy, WeakMap<ImageReference, RuleMatch | null>>();

/** Whether a rule admits only what the edge verified: signatures, attestations, or a check of verified data. */
export function verifies(rule: ImageRule): boolean {
  return rule.attestors !== undefined || rule.attestations !== undefined || rule.validate !== undefined;
}

/** Whether any rule of these policies verifies (signatures, attestations, checks of verified data). */
export function policiesVerify(policies: readonly ImagePolicy[]): boolean {
  return policies.some((p) => p.rules.some(verifies));
}

/**
 * Whether the mutating webhook (/mutate) can change anything under these policies: a rule pins tags
 * (digestMutate) or verifies, and a verified image's digest is recorded on its pod. Without such a rule
 * serve writes no mutating webhook configuration.
 */
export function policiesMutate(policies: readonly ImagePolicy[]): boolean {
  return policies.some((p) => p.rules.some((r) => r.digestMutate === true || verifies(r)));
}

/** The rule that decides an image under a policy: the first whose patterns match; undefined → the default. */
export function matchingRule(policy: ImagePolicy, ref: ImageReference): RuleMatch | undefined {
  let matches = matchesByPolicy.get(policy);
  if (!matches) matchesByPolicy.set(policy, (matches = new WeakMap()));
  let match = matches.get(ref);
  if (match === undefined) {
    match = null;
    for (const rule of policy.rules) {
      const pattern = rule.images.find((p) => p.test(ref));
      if (pattern) {
        match = { rule, pattern };
        break;
      }
    }
    matches.set(ref, match);
  }
  return match ?? undefined;
}

export interface ImageVerdict {
  rule: string;
  violation?: Violation;
  /** Said to the user without denying (signatures unchecked offline, a fail-open admission). */
  warning?: string;
  /** The registry could not answer a signature lookup and the server fails open. */
  failOpen?: { backend: string; error: string };
}

/** First matching rule wins; no match falls to the policy's default. Returns the deciding rule, and a violation when denied. */
function decideImage(
  policy: ImagePolicy,
  ref: ImageReference,
  image: string,
  field: string | undefined,
  ctx: EvaluationContext,
  judgements: EvaluationJudgements,
): ImageVerdict {
  const match = matchingRule(policy, ref);
  if (match) {
    const { rule, pattern: hit } = match;
    if (rule.action === "allow") {
      // Before digestVerify: pinning the image would not get it past this rule.
      if (rule.unverifiable !== undefined)
        return {
          rule: `rules[${rule.index}]`,
          violation: { policy: policy.name, rule: `rules[${rule.index}]`, image, ...(field ? { field } : {}), message: rule.unverifiable },
        };
      if (rule.digestVerify && !ref.digest) {
        return {
          rule: `rules[${rule.index}]`,
          violation: {
            policy: policy.name,
            rule: `rules[${rule.index}].digestVerify`,
            image,
            ...(field ? { field } : {}),
            message: digestRequiredMessage(rule, image, ctx),
          },
        };
      }
      if (verifies(rule)) return attestorVerdict(policy, rule, ref, image, field, ctx, judgements);
      return { rule: `rules[${rule.index}]` };
    }
    return {
      rule: `rules[${rule.index}]`,
      violation: {
        policy: policy.name,
        rule: `rules[${rule.index}]`,
        image,
        ...(field ? { field } : {}),
        message: rule.message ?? `matches ${JSON.stringify(hit.source)}, which this policy denies`,
      },
    };
  }
  if (policy.default === "allow") return { rule: "default" };
  return {
    rule: "default",
    violation: {
      policy: policy.name,
      rule: "default",
      image,
      ...(field ? { field } : {}),
      message: policy.defaultMessage ?? "no rule of this policy allows this image",
    },
  };
}

/** Why a tag is denied under digestVerify, and how to get past it from where the request came. */
function digestRequiredMessage(rule: ImageRule, image: string, ctx: EvaluationContext): string {
  const why = verifies(rule)
    ? "this rule verifies signatures on a digest, and a tag may point to another digest by the time the node pulls it"
    : "this policy requires a digest";
  const pin = `pin it as ${image}@sha256:<digest> ("imprimatur resolve ${image}" prints it)`;
  if (ctx.imageReview) return `${why}, and the image has only a tag; the ImagePolicyWebhook cannot change the pod to pin it: ${pin}`;
  return `${why}, and the image has only a tag: ${pin}${rule.digestMutate ? ", or install the mutating webhook (/mutate), which pins it on admission" : ""}`;
}

/**
 * What one evaluation has judged of verified data: an image in several containers is judged once (verification key
 * → why the attestation checks fail, "" when they pass), and each policy's CEL shares one budget (kube-apiserver's
 * budget per policy). Made when first needed: most admissions judge no verified data.
 */
class EvaluationJudgements {
  private judged: Map<string, string> | undefined;
  private budgets: Map<string, CostBudget> | undefined;

  failure(key: string): string | undefined {
    return this.judged?.get(key);
  }

  record(key: string, failure: string): void {
    (this.judged ??= new Map()).set(key, failure);
  }

  budget(policy: string): CostBudget {
    this.budgets ??= new Map();
    let budget = this.budgets.get(policy);
    if (!budget) this.budgets.set(policy, (budget = new CostBudget(RUNTIME_COST_BUDGET, "the conditions of one policy")));
    return budget;
  }
}

/** An allow rule with attestors admits the image only if the edge verified its signatures. */
function attestorVerdict(
  policy: ImagePolicy,
  rule: ImageRule,
  ref: ImageReference,
  image: string,
  field: string | undefined,
  ctx: EvaluationContext,
  judgements: EvaluationJudgements,
): ImageVerdict {
  const at = `rules[${rule.index}]`;
  if (!ctx.verifications)
    return {
      rule: at,
      warning: `image ${JSON.stringify(image)}: ${rule.attestations || rule.validate ? "signatures and attestations" : "signatures"} required by policy ${policy.name} ${at} were not checked (offline)`,
    };
  const key = verificationKey(policy.name, rule.index, image);
  const result = ctx.verifications.get(key);
  const violation = (message: string): ImageVerdict => ({
    rule: at,
    violation: { policy: policy.name, rule: at, image, ...(field ? { field } : {}), message },
  });
  if (!result) return violation("its signatures were not verified");
  switch (result.status) {
    case "verified": {
      if (!rule.attestations && !rule.validate) return { rule: at };
      // Within one evaluation an image in several containers is judged once; across admissions a judgement is kept
      // with the cached verification result while it holds (verified-judgements.ts).
      let failure = judgements.failure(key);
      if (failure === undefined) {
        const budget = judgements.budget(policy.name);
        failure = judgeVerified(
          result,
          rule,
          image,
          ctx.now,
          budget,
          () => attestationFailure(rule, result, ref, ctx.now, budget) ?? validateFailure(rule, result, ref, budget),
        );
        judgements.record(key, failure);
      }
      return failure ? violation(failure) : { rule: at };
    }
    case "denied":
      return violation(result.reason);
    case "unavailable":
      if (!ctx.failOpen) return violation(`its signatures could not be checked: ${result.reason}; denied because the server fails closed`);
      return {
        rule: at,
        warning: `image ${JSON.stringify(image)} was admitted without verified signatures: ${result.reason}; the server fails open`,
        failOpen: { backend: `registry/${result.registry}`, error: `${image}: ${result.reason}` },
      };
  }
}

/** What CEL sees of the image: its parts, with the digest verified. */
function imageData(ref: ImageReference, digest: string): Record<string, unknown> {
  return { registry: ref.registry, repository: ref.repository, tag: ref.tag ?? "", digest };
}

/**
 * Each attestation check judges the verified statements of its type (each signed by at least one of its attestor
 * entries) against its conditions and CEL, then its attestor sets against the signers of the statements that
 * pass: so `count: 2` needs two signers with passing statements, never one signer's two statements. With
 * `statementsMustPass: all` (the default) one failing statement denies. The first check that fails says why:
 * "attestations[1] (…/vuln/v1): conditions[0].all[1]: 3 is not Equals 0".
 */
function attestationFailure(
  rule: ImageRule,
  result: Extract<ImageVerification, { status: "verified" }>,
  ref: ImageReference,
  now: number | undefined,
  budget: CostBudget,
): string | undefined {
  // JMESPath conditions and CEL of one policy share its budget.
  const env = now === undefined ? { budget } : { now, budget };
  for (const check of rule.attestations ?? []) {
    const label = `attestations[${check.index}] (${check.predicateType})`;
    const found = result.attestations?.find((a) => a.index === check.index);
    const statements = found?.statements ?? [];
    if (statements.length === 0) return `${label}: no verified attestation: ${(found?.failures ?? ["not looked up"]).join("; ")}`;
    const passing: typeof statements = [];
    const verifiedBy = new Set<string>();
    let first: string | undefined;
    for (const [n, verified] of statements.entries()) {
      const { statement } = verified;
      const failure =
        (check.conditions ? evaluateConditions(check.conditions, statement.predicate, env) : undefined) ??
        (check.cel ? evaluateCel(check.cel, { predicate: statement.predicate ?? null, statement, image: imageData(ref, result.digest) }, budget) : undefined);
      for (const e of verified.signers) verifiedBy.add(e.entry);
      if (!failure) passing.push(verified);
      else if (check.statementsMustPass === "all")
        return `${label}: ${failure}${statements.length > 1 ? ` (statement ${n + 1} of ${statements.length} verified statements; statementsMustPass: all)` : ""}`;
      else first ??= failure;
    }
    if (passing.length === 0) return `${label}: ${first}${statements.length > 1 ? ` (none of ${statements.length} verified statements passes)` : ""}`;
    // Each entry's candidates: the distinct signers of passing statements whose signature satisfies it.
    const candidates = new Map<string, Map<string, SignerEvidence>>();
    for (const { signers } of passing)
      for (const e of signers) {
        let bySigner = candidates.get(e.entry);
        if (!bySigner) candidates.set(e.entry, (bySigner = new Map()));
        if (!bySigner.has(e.signer)) bySigner.set(e.signer, e);
      }
    const outcomes = new Map<string, EntryOutcome>();
    for (const leaf of leafAttestors(check.attestors)) {
      const signers = candidates.get(leaf.path);
      if (signers) outcomes.set(leaf.path, { ok: true, signers: [...signers.values()] });
      else
        outcomes.set(leaf.path, {
          ok: false,
          reason: verifiedBy.has(leaf.path) ? "no statement it verified passes its conditions" : "no statement of this type is signed by it",
        });
    }
    const judged = judgeAttestors(check.attestors, outcomes);
    if (!judged.satisfied) return `${label}: ${judged.explanation}`;
  }
  return undefined;
}

/** `validate.cel` over the verified data: the image, its signers, and the verified statements by predicate type. */
function validateFailure(
  rule: ImageRule,
  result: Extract<ImageVerification, { status: "verified" }>,
  ref: ImageReference,
  budget: CostBudget,
): string | undefined {
  if (!rule.validate) return undefined;
  const attestations: Record<string, unknown[]> = {};
  for (const a of result.attestations ?? []) (attestations[a.predicateType] ??= []).push(...a.statements.map((s) => s.statement));
  const failure = evaluateCel(
    rule.validate.cel,
    {
      image: imageData(ref, result.digest),
      signers: [...result.evidence, ...(result.attestations ?? []).flatMap((a) => a.statements.flatMap((s) => s.signers))].map((e) => e.signer),
      attestations,
    },
    budget,
  );
  return failure === undefined ? undefined : `validate: ${rule.validate.message ?? failure}`;
}

export function evaluateImagePolicies(policies: readonly ImagePolicy[], request: ImageRequest, ctx: EvaluationContext): Decision {
  const applicable: ImagePolicy[] = [];
  const blocking: Violation[] = []; // violations no break-glass can set aside
  const advisories: Violation[] = []; // failures of policies or rules whose validationActions hold no Deny
  for (const policy of policies) {
    const a = policyApplies(policy, request.namespace, ctx);
    if ("unknown" in a) {
      // Whether the policy applies is undecided: its failure, acted on as its validationActions say.
      const failure = stamped(a.unknown, policy, policy.validationActions);
      (denies(failure) ? blocking : advisories).push(failure);
    } else if (a.applies) applicable.push(policy);
  }

  const denials: Array<{ violation: Violation; policy: ImagePolicy }> = [];
  const passes: Pass[] = [];
  const warningSet = new Set<string>(); // one image in many containers warns once
  const failOpen: Array<{ backend: string; error: string }> = [];
  const judgements = new EvaluationJudgements();
  for (const { image, field } of request.images) {
    const parsed = parseImageReferenceCached(image);
    if (!parsed.ok) {
      blocking.push({ policy: "imprimatur", rule: "imageReference", image, ...(field ? { field } : {}), message: parsed.error });
      continue;
    }
    for (const policy of applicable) {
      const verdict = decideImage(policy, parsed.ref, image, field, ctx, judgements);
      if (verdict.warning) warningSet.add(verdict.warning);
      if (verdict.failOpen) failOpen.push(verdict.failOpen);
      if (verdict.violation) {
        const violation = stamped(verdict.violation, policy, actionsOfRule(policy, matchingRule(policy, parsed.ref)?.rule));
        if (denies(violation)) denials.push({ violation, policy });
        else advisories.push(violation);
      } else
        passes.push({
          kind: policy.namespace === undefined ? "ImagePolicy" : "NamespacedImagePolicy",
          policy: policy.name,
          rule: verdict.rule,
          image,
          ...(field ? { field } : {}),
        });
    }
  }

  const { listed, more } = capList([...warningSet]);
  const warnings = more > 0 ? [...listed, moreText(more, "more warnings")] : listed;
  const policyNames = applicable.map((p) => p.name).join(",") || "none";
  const verified = ctx.verifications && verifiedImagesText(ctx.verifications);
  const evidence: Record<string, string> = verified !== undefined ? { "verified-images": verified } : {};
  const advised = advisories.length > 0 ? { advisories } : {};
  if (blocking.length === 0 && denials.length === 0) {
    const allowed = allow({
      auditAnnotations: { decision: "allowed", policies: policyNames, ...evidence },
      warnings,
      ...(passes.length > 0 ? { passes } : {}),
      ...advised,
    });
    if (failOpen.length > 0) {
      allowed.failOpen = failOpen;
      allowed.auditAnnotations["fail-open"] = "true";
    }
    return allowed;
  }
  const violations = [...blocking, ...denials.map((d) => d.violation)];
  const denied = deny(violations, {
    auditAnnotations: { decision: "denied", policies: policyNames, reason: renderReason(violations), ...evidence },
    warnings,
    ...(passes.length > 0 ? { passes } : {}),
    ...advised,
  });
  return applyBreakGlass(denied, {
    annotations: request.annotations,
    namespace: request.namespace,
    blocking,
    denials,
    access: ctx.breakGlassAccess,
  });
}

/** The actions of the rule that decided, else the policy's (the default rule and undecidable scopes). */
function actionsOfRule(policy: ImagePolicy, rule: ImageRule | undefined): readonly ValidationAction[] | undefined {
  return rule?.validationActions ?? policy.validationActions;
}

/** The violation with the actions it is to be acted on by (absent: Deny), and the kind when the policy is namespaced. */
function stamped(violation: Violation, policy: ImagePolicy, actions: readonly ValidationAction[] | undefined): Violation {
  const kind = policy.namespace === undefined ? {} : { kind: "NamespacedImagePolicy" as const };
  return actions || policy.namespace !== undefined ? { ...violation, ...kind, ...(actions ? { actions } : {}) } : violation;
}
