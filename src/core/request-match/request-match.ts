// Which requests a policy is for: ValidatingAdmissionPolicy's `matchConstraints` (resource rules and their
// exclusions, namespace and object selectors) and `matchConditions` (CEL), as Kyverno's ImageValidatingPolicy
// writes them, plus the request's users, groups and service accounts in Kyverno's subject shape (VAP has them
// only through CEL). Pure: the request and the namespace's labels come from the edge.
//
// Order and meaning follow VAP: the constraints first (a request outside them is not the policy's business),
// then the conditions; a condition that is false takes the request out of scope, and one that fails (an error,
// a non-boolean) leaves the failure policy to decide, unless another condition is false.
import type { AdmissionRequest } from "../admission-review.ts";
import { CostBudget, celTruth, type CompiledCel } from "../conditions/cel-expression.ts";
import { MATCH_CONDITIONS_COST_BUDGET } from "../conditions/cel-cost-limits.ts";
import { compileGlob, type GlobMatcher } from "../primitives/glob.ts";
import { asObject, stringMap } from "../primitives/json-shapes.ts";
import { describeLabelSelector, matchesLabelSelector, type LabelSelector } from "../label-selector.ts";
import { UNKNOWN_NAMESPACE_LABELS_HINT } from "../namespace-labels.ts";

/** One resource rule, as VAP's NamedRuleWithOperations: every list non-empty, "*" for any. */
export interface ResourceRule {
  apiGroups: string[];
  apiVersions: string[];
  /** "pods", "pods/ephemeralcontainers", "*" (every resource, no subresource), "*\/*", "pods/*", "*\/scale". */
  resources: string[];
  operations: string[];
}

/** A user, group or service account of the request (Kyverno's `subjects`, RBAC's Subject). Names may use "*". */
export interface RequestSubject {
  kind: "User" | "Group" | "ServiceAccount";
  name: string;
  /** Service accounts only. */
  namespace?: string;
}

export interface MatchCondition {
  name: string;
  expression: CompiledCel;
}

export interface RequestMatch {
  resourceRules?: ResourceRule[];
  excludeResourceRules?: ResourceRule[];
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
  subjects?: RequestSubject[];
  excludeSubjects?: RequestSubject[];
  matchConditions?: MatchCondition[];
}

/**
 * What a policy can be matched against: the admission request, and what the edge knows of its namespace. An
 * ImageReview stands for a pod's creation and carries its namespace, annotations and images only: it is matched
 * as a pod with those annotations, no labels and no author (admission-subject.ts builds that request).
 */
export interface MatchedRequest {
  request: AdmissionRequest;
  /** Labels of the request's namespace; undefined when unknown. */
  namespaceLabels?: Record<string, string>;
}

export type MatchOutcome =
  | { inScope: boolean }
  /** Whether the policy applies cannot be known (namespace labels unknown): fail closed, with the reason. */
  | { undecided: string; rule: string }
  /** A condition failed to evaluate: the failure policy decides (deny when failing closed), with the reason. */
  | { conditionError: string; rule: string };

/** Whether deciding the scope may need the namespace's labels: a namespace selector, or conditions (namespaceObject). */
export function matchUsesNamespaceLabels(match: RequestMatch | undefined): boolean {
  return match?.namespaceSelector !== undefined || (match?.matchConditions?.length ?? 0) > 0;
}

/** Whether a request is one the policy is for. */
export function matchRequest(match: RequestMatch, req: MatchedRequest): MatchOutcome {
  const r = req.request;
  const resource = r.resource ?? {};
  const target: RuleResource = {
    group: resource.group ?? "",
    version: resource.version ?? "",
    resource: resource.resource ?? "",
    subResource: r.subResource ?? "",
    operation: r.operation ?? "",
  };
  const covers = (rule: ResourceRule) => ruleCovers(rule, target);
  if (match.resourceRules && !match.resourceRules.some(covers)) return { inScope: false };
  if (match.excludeResourceRules?.some(covers)) return { inScope: false };

  const namespace = r.namespace ?? "";
  // As VAP: the namespace selector does not apply to cluster-scoped objects.
  if (match.namespaceSelector && namespace !== "") {
    if (req.namespaceLabels === undefined) {
      return {
        rule: "matchConstraints.namespaceSelector",
        undecided:
          `the labels of namespace ${JSON.stringify(namespace)} are unknown, so whether this policy applies ` +
          `(selector ${describeLabelSelector(match.namespaceSelector)}) cannot be decided; ` +
          UNKNOWN_NAMESPACE_LABELS_HINT,
      };
    }
    if (!matchesLabelSelector(match.namespaceSelector, req.namespaceLabels)) return { inScope: false };
  }

  // As VAP: on an update, the labels before or after the change may select the object.
  if (match.objectSelector) {
    const selector = match.objectSelector;
    const selected = [r.object, r.oldObject].some((o) => o && matchesLabelSelector(selector, labelsOf(o)));
    if (!selected) return { inScope: false };
  }
  if (match.subjects && !match.subjects.some((s) => subjectCovers(s, r.userInfo))) return { inScope: false };
  if (match.excludeSubjects?.some((s) => subjectCovers(s, r.userInfo))) return { inScope: false };

  let error: { conditionError: string; rule: string } | undefined;
  // As kube-apiserver's: the conditions of one policy share one cost budget per request.
  const budget = new CostBudget(MATCH_CONDITIONS_COST_BUDGET, "the matchConditions of one policy");
  for (const condition of match.matchConditions ?? []) {
    const outcome = runCondition(condition, req, budget);
    if (outcome === false) return { inScope: false };
    if (typeof outcome === "string") error ??= { conditionError: outcome, rule: `matchConditions[${condition.name}]` };
  }
  return error ?? { inScope: true };
}

/** What a policy's conditions see: VAP's variables `object`, `oldObject`, `request` and `namespaceObject`. */
export function conditionBindings(req: MatchedRequest): Record<string, unknown> {
  const r = req.request;
  const namespace = r.namespace ?? "";
  return {
    object: r.object ?? null,
    oldObject: r.oldObject ?? null,
    request: {
      uid: r.uid,
      kind: r.kind ?? {},
      resource: r.resource ?? {},
      subResource: r.subResource ?? "",
      name: r.name ?? "",
      namespace,
      operation: r.operation ?? "",
      // As VAP's typed request: fields the apiserver left out read as empty, not as missing.
      userInfo: { username: "", uid: "", groups: [], ...r.userInfo },
      dryRun: r.dryRun ?? false,
    },
    // What the server knows of the Namespace: its name and labels (from the API or a namespaces file).
    namespaceObject: namespace === "" || req.namespaceLabels === undefined ? null : { metadata: { name: namespace, labels: req.namespaceLabels } },
  };
}

/** true or false, or why the expression gave neither (an error, another type, the cost budget spent). */
function runCondition(condition: MatchCondition, req: MatchedRequest, budget: CostBudget): boolean | string {
  const truth = celTruth(condition.expression, conditionBindings(req), budget);
  return typeof truth === "boolean" ? truth : `matchCondition ${JSON.stringify(condition.name)} failed: ${truth.error}`;
}

/**
 * A request's resource and operation as a rule sees them. A webhook rule's resource (mayMatchResource) stands for
 * several requests: a version of "*" for any version, and no operation for any operation.
 */
export interface RuleResource {
  group: string;
  version: string;
  resource: string;
  subResource: string;
  operation?: string;
}

/**
 * Whether a resource rule covers a request: each of its lists (operations, groups, versions) holds "*" or the
 * request's value, and one of its resource patterns covers the resource. The one matcher for requests
 * (matchRequest), for the webhook rules Imprimatur asks for (mayMatchResource) and, by its parts, for exclusions
 * that leave a policy nothing (compile-request-match.ts).
 */
export function ruleCovers(rule: ResourceRule, r: RuleResource): boolean {
  return (
    (r.operation === undefined || listCovers(rule.operations, r.operation)) &&
    listCovers(rule.apiGroups, r.group) &&
    (r.version === "*" || listCovers(rule.apiVersions, r.version)) &&
    rule.resources.some((pattern) => resourcePatternCovers(pattern, r.resource, r.subResource))
  );
}

/** Whether one of a rule's lists (groups, versions, operations) covers a value: it holds "*" or the value. */
export function listCovers(list: readonly string[], value: string): boolean {
  return list.includes("*") || list.includes(value);
}

/** VAP's resource patterns: "*" is every resource but no subresource; "a/*", "*\/b", "*\/*" reach subresources. */
export function resourcePatternCovers(pattern: string, resource: string, subResource: string): boolean {
  const slash = pattern.indexOf("/");
  if (slash < 0) return subResource === "" && (pattern === "*" || pattern === resource);
  if (subResource === "") return false;
  const res = pattern.slice(0, slash);
  const sub = pattern.slice(slash + 1);
  return (res === "*" || res === resource) && (sub === "*" || sub === subResource);
}

const subjectNameMatchers = new Map<string, GlobMatcher>();

function nameMatches(pattern: string, name: string): boolean {
  let matcher = subjectNameMatchers.get(pattern);
  if (!matcher) {
    // Patterns come from loaded policies: bounded by their size.
    matcher = compileGlob(pattern);
    subjectNameMatchers.set(pattern, matcher);
  }
  return matcher(name);
}

const SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:";

function subjectCovers(subject: RequestSubject, userInfo: AdmissionRequest["userInfo"]): boolean {
  const username = userInfo?.username ?? "";
  switch (subject.kind) {
    case "User":
      return nameMatches(subject.name, username);
    case "Group":
      return (userInfo?.groups ?? []).some((g) => nameMatches(subject.name, g));
    case "ServiceAccount": {
      if (!username.startsWith(SERVICE_ACCOUNT_PREFIX)) return false;
      const [namespace, name, ...rest] = username.slice(SERVICE_ACCOUNT_PREFIX.length).split(":");
      return rest.length === 0 && name !== undefined && nameMatches(subject.namespace ?? "*", namespace!) && nameMatches(subject.name, name);
    }
  }
}

function labelsOf(object: Record<string, unknown>): Record<string, string> {
  return stringMap(asObject(object.metadata)?.labels);
}
