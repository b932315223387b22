// Which requests a Kyverno rule is for (match and exclude, with resource filters under any/all, or the older
// match.resources), as an ImagePolicy's namespaces, namespaceSelector and matchConstraints. What cannot be said
// that way is left out with a finding: a narrower match left out makes the policy apply to more requests (as
// strict or stricter), and so does an exclusion left out.
import { isJson, listOf, stringsOf, type FindingLog, type Json } from "./conversion.ts";

/** Kinds whose pods Imprimatur judges anyway (Kyverno's auto-generated rules cover the same controllers). */
const POD_KINDS = new Set(["Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicationController", "PodTemplate"]);

/** The scope fields of the converted spec: namespaces, namespaceSelector, matchConstraints. */
export function convertKyvernoScope(rule: Json, at: string, policyNamespace: string | undefined, log: FindingLog): Json {
  const out: Json = {};
  const constraints: Json = {};
  const match = filtersOf(rule.match, `${at}.match`, log);
  if (match.length > 1)
    log.note(`${at}.match`, "several resource filters: converted as the first alone is not possible; the policy applies to every request (stricter)");
  if (match.length === 1) {
    const [filter, fAt] = match[0]!;
    const resources = isJson(filter.resources) ? filter.resources : {};
    const kinds = stringsOf(resources.kinds).map((k) => k.replace(/^.*\//, ""));
    const others = kinds.filter((k) => !POD_KINDS.has(k));
    if (others.length > 0)
      log.note(
        `${fAt}.resources.kinds`,
        `${others.join(", ")}: Imprimatur judges pods and their templates (and custom resources registered in the ServerConfig)`,
      );
    const namespaces = stringsOf(resources.namespaces);
    if (namespaces.length > 0) {
      if (namespaces.some((n) => /[*?]/.test(n)))
        log.note(`${fAt}.resources.namespaces`, "wildcards are not carried over: the policy applies in every namespace (stricter)");
      else if (policyNamespace === undefined) out.namespaces = namespaces;
    }
    if (isJson(resources.namespaceSelector)) out.namespaceSelector = resources.namespaceSelector;
    if (isJson(resources.selector)) constraints.objectSelector = resources.selector;
    for (const field of ["names", "annotations", "operations"])
      if (resources[field] !== undefined) log.note(`${fAt}.resources.${field}`, "not carried over: the policy applies whatever they say (stricter)");
    const subjects = subjectsOf(filter.subjects, `${fAt}.subjects`, log);
    if (subjects.length > 0) constraints.subjects = subjects;
    for (const field of ["roles", "clusterRoles"])
      if (filter[field] !== undefined) log.note(`${fAt}.${field}`, "not carried over: the policy applies to requests by anyone (stricter)");
  }
  const exclude = filtersOf(rule.exclude, `${at}.exclude`, log);
  const excludedNamespaces: string[] = [];
  const excludedSubjects: Json[] = [];
  for (const [filter, fAt] of exclude) {
    const resources = isJson(filter.resources) ? filter.resources : {};
    const namespaces = stringsOf(resources.namespaces);
    const other = Object.keys(resources).filter((k) => k !== "namespaces" && k !== "kinds");
    if (namespaces.some((n) => /[*?]/.test(n)))
      log.note(`${fAt}.resources.namespaces`, "wildcards are not carried over: nothing is excluded by them (stricter)");
    else excludedNamespaces.push(...namespaces);
    for (const field of other) log.note(`${fAt}.resources.${field}`, "exclusions by this field are not carried over (stricter)");
    excludedSubjects.push(...subjectsOf(filter.subjects, `${fAt}.subjects`, log));
    for (const field of ["roles", "clusterRoles"])
      if (filter[field] !== undefined) log.note(`${fAt}.${field}`, "exclusions by role are not carried over (stricter)");
  }
  if (excludedNamespaces.length > 0) {
    // By the namespace's name label (set by Kubernetes from 1.21), as Kyverno's own docs exclude kube-system.
    const selector = isJson(out.namespaceSelector) ? out.namespaceSelector : {};
    out.namespaceSelector = {
      ...selector,
      matchExpressions: [...listOf(selector.matchExpressions), { key: "kubernetes.io/metadata.name", operator: "NotIn", values: excludedNamespaces }],
    };
  }
  if (excludedSubjects.length > 0) constraints.excludeSubjects = excludedSubjects;
  if (Object.keys(constraints).length > 0) out.matchConstraints = constraints;
  return out;
}

/** The resource filters of a match or exclude block (any, all, or the older resources/subjects at its top). */
function filtersOf(block: unknown, at: string, log: FindingLog): Array<[Json, string]> {
  if (!isJson(block)) return [];
  const out: Array<[Json, string]> = [];
  if (Array.isArray(block.any)) block.any.forEach((f, i) => isJson(f) && out.push([f, `${at}.any[${i}]`]));
  if (Array.isArray(block.all)) {
    if (block.all.length > 1) log.note(`${at}.all`, "several filters that must all hold: each is carried over as far as it goes");
    block.all.forEach((f, i) => isJson(f) && out.push([f, `${at}.all[${i}]`]));
  }
  if (block.resources !== undefined || block.subjects !== undefined) out.push([block, at]);
  return out;
}

/** RBAC subjects, as matchConstraints takes them. */
function subjectsOf(raw: unknown, at: string, log: FindingLog): Json[] {
  const out: Json[] = [];
  listOf(raw).forEach((s, i) => {
    if (!isJson(s) || typeof s.name !== "string" || !["User", "Group", "ServiceAccount"].includes(s.kind as string))
      return log.note(`${at}[${i}]`, "not a User, Group or ServiceAccount with a name: not carried over");
    out.push({ kind: s.kind, name: s.name, ...(s.kind === "ServiceAccount" ? { namespace: typeof s.namespace === "string" ? s.namespace : "*" } : {}) });
  });
  return out;
}
