// From a schema-valid ImagePolicy document to the compiled form the core evaluates. Pure.
import { DEFAULT_REQUIRED_ANNOTATIONS } from "../break-glass.ts";
import { isImagePolicyAnnotation } from "../image-review.ts";
import { compileImagePattern, type ImagePattern } from "../image-pattern.ts";
import { compileLinearRegex, type LinearRegex } from "../primitives/linear-regex.ts";
import type { AttestationCheck, ImagePolicy, ImageRule } from "./image-policy.ts";
import { compileCel } from "../conditions/cel-expression.ts";
import { compileConditions, type RawConditionBlock } from "../conditions/conditions.ts";

/** What an attestation's `cel:` sees: the predicate, the whole statement, and the image. */
export const ATTESTATION_CEL_VARIABLES = ["predicate", "statement", "image"] as const;
/** What `validate.cel` sees: the image, its verified signers, and verified statements by predicate type. */
export const VALIDATE_CEL_VARIABLES = ["image", "signers", "attestations"] as const;
import { compileAttestorSets, type RawAttestorSet, type RelatedFileReader } from "./compile-attestors.ts";
import { leafAttestors } from "./attestors.ts";
import { parseImageReference } from "../image-reference.ts";
import { compileImagePath, type ImagePath, type RawImagePath } from "../image-paths.ts";
import { compileLabelSelector, type LabelSelector } from "../label-selector.ts";
import { compileRequestMatch } from "../request-match/compile-request-match.ts";
import { compileValidationActions, type ValidationAction } from "../validation-actions.ts";

export interface RawImagePolicy {
  metadata: { name: string };
  spec: {
    namespaces?: string[];
    namespaceSelector?: LabelSelector;
    clusters?: string[];
    matchConstraints?: unknown;
    matchConditions?: unknown;
    imagePaths?: RawImagePath[];
    rules: Array<{
      action: "allow" | "deny";
      images?: string[];
      /** The image-verification design's spelling of `images`. */
      imageReferences?: string[];
      message?: string;
      digestVerify?: boolean;
      digestMutate?: boolean;
      /** Kyverno's spellings of digestVerify and digestMutate. */
      verifyDigest?: boolean;
      mutateDigest?: boolean;
      attestors?: RawAttestorSet[];
      repository?: string;
      attestations?: Array<{
        predicateType: string;
        attestors?: RawAttestorSet[];
        conditions?: RawConditionBlock[];
        cel?: string;
        statementsMustPass?: "all" | "any";
      }>;
      validate?: { cel: string; message?: string };
      validationActions?: unknown;
    }>;
    default?: "allow" | "deny";
    validationActions?: unknown;
    defaultMessage?: string;
    breakGlass?: { allowed?: boolean; requiredAnnotations?: string[]; ticketPattern?: string };
  };
}

export type FieldError = { path: Array<string | number>; message: string };

export function compileImagePolicy(
  raw: RawImagePolicy,
  source?: ImagePolicy["source"],
  related?: RelatedFileReader,
): { policy?: ImagePolicy; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const rules: ImageRule[] = raw.spec.rules.map((r, index) => {
    const images: ImagePattern[] = [];
    for (const field of ["images", "imageReferences"] as const)
      r[field]?.forEach((p, j) => {
        const compiled = compileImagePattern(p);
        if (compiled.ok) images.push(compiled.pattern);
        else errors.push({ path: ["spec", "rules", index, field, j], message: compiled.error });
      });
    if (r.images === undefined && r.imageReferences === undefined)
      errors.push({ path: ["spec", "rules", index], message: 'missing required field "images" (or its alias "imageReferences")' });
    const digestVerify = digestSetting(r, "digestVerify", "verifyDigest", index, errors);
    const digestMutate = digestSetting(r, "digestMutate", "mutateDigest", index, errors);
    if (r.action === "deny" && (digestVerify || digestMutate)) {
      errors.push({ path: ["spec", "rules", index], message: "digestVerify and digestMutate apply to images a rule allows; a deny rule cannot use them" });
    }
    const verifying = (["attestors", "repository", "attestations", "validate"] as const).find((f) => r[f] !== undefined);
    // A rule that verifies signatures admits what it verified: the digest, never a tag that may move a second
    // later (Kyverno's verifyDigest and mutateDigest default to true, policy-controller refuses tags). So such a
    // rule requires the digest and pins tags on /mutate unless the policy says otherwise.
    const verifiesDigest = r.action === "allow" && verifying !== undefined;
    if (r.action === "deny" && verifying) {
      errors.push({
        path: ["spec", "rules", index, verifying],
        message: "attestors say who must have signed an image a rule allows; a deny rule cannot use them",
      });
    }
    const rule: ImageRule = {
      index,
      action: r.action,
      images,
      ...(r.message !== undefined ? { message: r.message } : {}),
      ...((digestVerify ?? verifiesDigest) ? { digestVerify: true } : {}),
      ...((digestMutate ?? verifiesDigest) ? { digestMutate: true } : {}),
    };
    if (r.validationActions !== undefined) {
      const actions = validationActionsAt(r.validationActions, ["spec", "rules", index, "validationActions"], errors);
      if (actions) rule.validationActions = actions;
    }
    if (r.attestors && r.action === "allow") {
      const compiled = compileAttestorSets(r.attestors, ["spec", "rules", index, "attestors"], related);
      errors.push(...compiled.errors);
      rule.attestors = compiled.sets;
    }
    if (r.repository !== undefined) {
      // A repository, not an image: no tag or digest (cosign's COSIGN_REPOSITORY).
      const parsed = parseImageReference(r.repository);
      if (!parsed.ok || parsed.ref.tag !== undefined || parsed.ref.digest !== undefined)
        errors.push({
          path: ["spec", "rules", index, "repository"],
          message: `${JSON.stringify(r.repository)} is not a repository (registry/path, without tag or digest)${parsed.ok ? "" : `: ${parsed.error}`}`,
        });
      else if (!r.attestors)
        errors.push({ path: ["spec", "rules", index, "repository"], message: "repository says where signatures live; it needs attestors" });
      else rule.signatureRepository = { registry: parsed.ref.registry, repository: parsed.ref.repository };
    }
    if (r.action === "allow" && r.attestations) {
      rule.attestations = r.attestations.map((a, j) => {
        const at = ["spec", "rules", index, "attestations", j];
        let attestors = rule.attestors ?? [];
        if (a.attestors) {
          const own = compileAttestorSets(a.attestors, [...at, "attestors"], related);
          errors.push(...own.errors);
          attestors = own.sets;
        } else if (!rule.attestors) errors.push({ path: at, message: "an attestation needs attestors: its own, or the rule's" });
        if (leafAttestors(attestors).some((leaf) => leaf.type === "notary"))
          errors.push({
            path: a.attestors ? [...at, "attestors"] : at,
            message:
              "attestations are verified with Sigstore signatures (keys, keyless); a notary entry verifies the image's Notary Project signatures only" +
              (a.attestors ? "" : ": give this attestation attestors of its own"),
          });
        const check: AttestationCheck = { index: j, predicateType: a.predicateType, attestors, statementsMustPass: a.statementsMustPass ?? "all" };
        if (a.conditions) {
          const compiled = compileConditions(a.conditions, [...at, "conditions"]);
          errors.push(...compiled.errors);
          check.conditions = compiled.conditions;
        }
        if (a.cel !== undefined) {
          try {
            check.cel = compileCel(a.cel, ATTESTATION_CEL_VARIABLES);
          } catch (e) {
            errors.push({ path: [...at, "cel"], message: (e as Error).message });
          }
        }
        return check;
      });
    }
    if (r.action === "allow" && r.validate) {
      try {
        rule.validate = {
          cel: compileCel(r.validate.cel, VALIDATE_CEL_VARIABLES),
          ...(r.validate.message !== undefined ? { message: r.validate.message } : {}),
        };
      } catch (e) {
        errors.push({ path: ["spec", "rules", index, "validate", "cel"], message: (e as Error).message });
      }
    }
    return rule;
  });

  const { selector: namespaceSelector, issues: selectorIssues } = compileLabelSelector(raw.spec.namespaceSelector, ["spec", "namespaceSelector"]);
  errors.push(...selectorIssues);

  const scope = compileRequestMatch(raw.spec as Record<string, unknown>);
  errors.push(...scope.issues);

  const imagePaths: ImagePath[] = [];
  raw.spec.imagePaths?.forEach((p, i) => {
    const compiled = compileImagePath(p, raw.metadata.name, ["spec", "imagePaths", i]);
    errors.push(...compiled.errors);
    if (compiled.imagePath) imagePaths.push(compiled.imagePath);
  });

  const bg = raw.spec.breakGlass ?? {};
  const extra = bg.requiredAnnotations ?? [];
  extra.forEach((key, i) => {
    // Only *.image-policy.k8s.io/* annotations reach an ImageReview backend; any other key could never be seen.
    if (!isImagePolicyAnnotation(key)) {
      errors.push({
        path: ["spec", "breakGlass", "requiredAnnotations", i],
        message: `${JSON.stringify(key)} is not of the form <name>.image-policy.k8s.io/<key>, so backends would never receive it`,
      });
    }
  });
  let ticketPattern: LinearRegex | undefined;
  if (bg.ticketPattern !== undefined) {
    const compiled = compileLinearRegex(bg.ticketPattern, "anywhere");
    if ("error" in compiled) errors.push({ path: ["spec", "breakGlass", "ticketPattern"], message: compiled.error });
    else ticketPattern = compiled.regex;
  }

  const validationActions =
    raw.spec.validationActions === undefined ? undefined : validationActionsAt(raw.spec.validationActions, ["spec", "validationActions"], errors);

  if (errors.length > 0) return { errors };
  return {
    errors,
    policy: {
      name: raw.metadata.name,
      ...(source ? { source } : {}),
      ...(raw.spec.namespaces ? { namespaces: raw.spec.namespaces } : {}),
      ...(namespaceSelector ? { namespaceSelector } : {}),
      ...(raw.spec.clusters ? { clusters: raw.spec.clusters } : {}),
      ...(scope.match ? { match: scope.match } : {}),
      ...(imagePaths.length > 0 ? { imagePaths } : {}),
      rules,
      default: raw.spec.default ?? "deny",
      ...(validationActions ? { validationActions } : {}),
      ...(raw.spec.defaultMessage !== undefined ? { defaultMessage: raw.spec.defaultMessage } : {}),
      breakGlass: {
        allowed: bg.allowed ?? false,
        requiredAnnotations: [...new Set([...DEFAULT_REQUIRED_ANNOTATIONS, ...extra])],
        ...(ticketPattern ? { ticketPattern } : {}),
      },
    },
  };
}

function validationActionsAt(raw: unknown, path: FieldError["path"], errors: FieldError[]): ValidationAction[] | undefined {
  const compiled = compileValidationActions(raw);
  if (compiled.error) errors.push({ path, message: compiled.error });
  return compiled.actions;
}

/** A rule's digestVerify or digestMutate under either spelling; undefined when the rule gives neither. */
function digestSetting(
  rule: RawImagePolicy["spec"]["rules"][number],
  name: "digestVerify" | "digestMutate",
  alias: "verifyDigest" | "mutateDigest",
  index: number,
  errors: FieldError[],
): boolean | undefined {
  const own = rule[name];
  const other = rule[alias];
  if (own !== undefined && other !== undefined && own !== other)
    errors.push({ path: ["spec", "rules", index, alias], message: `${alias} is another name for ${name}, which says ${own}: give one of them` });
  return own ?? other;
}
