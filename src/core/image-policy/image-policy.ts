// The ImagePolicy kind, compiled (patterns parsed, defaults filled), and its pure evaluation.
import { allow, deny, renderReason, type Decision, type Pass, type Violation } from "../decision.ts";
import type { ImagePattern } from "../image-pattern.ts";
import { parseImageReferenceCached, type ImageReference } from "../image-reference.ts";
import { describeLabelSelector, matchesLabelSelector, type LabelSelector } from "../label-selector.ts";
import { applyBreakGlass, type BreakGlassPolicy } from "../break-glass.ts";
import type { PolicyOrigin } from "../policy-kind.ts";

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
}

export interface ImagePolicy {
  name: string;
  /** Where it was loaded from, for messages and `check`. */
  source?: PolicyOrigin;
  namespaces?: string[];
  namespaceSelector?: LabelSelector;
  rules: ImageRule[];
  default: ImageAction;
  defaultMessage?: string;
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
            `give the server access to the Kubernetes API or a namespaces file`,
        },
      };
    }
    return { applies: matchesLabelSelector(policy.namespaceSelector, ctx.namespaceLabels) };
  }
  return { applies: true };
}

/** The rule that decides an image under a policy: the first whose patterns match; undefined → the default. */
export function matchingRule(policy: ImagePolicy, ref: ImageReference): { rule: ImageRule; pattern: ImagePattern } | undefined {
  for (const rule of policy.rules) {
    const pattern = rule.images.find((p) => p.test(ref));
    if (pattern) return { rule, pattern };
  }
  return undefined;
}

/** First matching rule wins; no match falls to the policy's default. Returns the deciding rule, and a violation when denied. */
export function decideImage(policy: ImagePolicy, ref: ImageReference, image: string, field?: string): { rule: string; violation?: Violation } {
  const match = matchingRule(policy, ref);
  if (match) {
    const { rule, pattern: hit } = match;
    if (rule.action === "allow") {
      if (rule.digestVerify && !ref.digest) {
        return {
          rule: `rules[${rule.index}]`,
          violation: {
            policy: policy.name,
            rule: `rules[${rule.index}].digestVerify`,
            image,
            ...(field ? { field } : {}),
            message:
              `this policy requires a digest, and the image has only a tag: pin it as ${image}@sha256:<digest> ` +
              `("imprimatur resolve ${image}" prints it)` +
              (rule.digestMutate ? ", or install the mutating webhook (/mutate), which pins it on admission" : ""),
          },
        };
      }
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

export function evaluateImagePolicies(policies: readonly ImagePolicy[], request: ImageRequest, ctx: EvaluationContext): Decision {
  const applicable: ImagePolicy[] = [];
  const blocking: Violation[] = []; // violations no break-glass can set aside
  for (const policy of policies) {
    const a = policyApplies(policy, request.namespace, ctx);
    if ("unknown" in a) blocking.push(a.unknown);
    else if (a.applies) applicable.push(policy);
  }

  const denials: Array<{ violation: Violation; policy: ImagePolicy }> = [];
  const passes: Pass[] = [];
  for (const { image, field } of request.images) {
    const parsed = parseImageReferenceCached(image);
    if (!parsed.ok) {
      blocking.push({ policy: "imprimatur", rule: "imageReference", image, ...(field ? { field } : {}), message: parsed.error });
      continue;
    }
    for (const policy of applicable) {
      const { rule, violation } = decideImage(policy, parsed.ref, image, field);
      if (violation) denials.push({ violation, policy });
      else passes.push({ kind: "ImagePolicy", policy: policy.name, rule, image, ...(field ? { field } : {}) });
    }
  }

  const policyNames = applicable.map((p) => p.name).join(",") || "none";
  if (blocking.length === 0 && denials.length === 0) {
    return allow({ auditAnnotations: { decision: "allowed", policies: policyNames }, ...(passes.length > 0 ? { passes } : {}) });
  }
  const violations = [...blocking, ...denials.map((d) => d.violation)];
  const denied = deny(violations, {
    auditAnnotations: { decision: "denied", policies: policyNames, reason: renderReason(violations) },
    ...(passes.length > 0 ? { passes } : {}),
  });
  return applyBreakGlass(denied, {
    annotations: request.annotations,
    namespace: request.namespace,
    blocking,
    denials,
  });
}
