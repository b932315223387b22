// Reads policy documents (multi-document YAML or JSON) from a PolicySource, dispatches each to its kind in the
// policy-kind registry, and reports every problem with origin, document, line, field path and reason.
import { dirname, resolve as resolvePath } from "node:path";
import { readKubeYaml } from "../config/kube-yaml.ts";
import {
  apiVersionsOf,
  compilerOf,
  DOCUMENT_KIND_NAMES,
  documentKindOf,
  emptyPolicySet,
  KIND_NAMES,
  type KindName,
  type PolicySet,
} from "../core/policy-set/policy-kinds.ts";
import type { CompiledPolicy } from "../core/policy-kind.ts";
import { formatPath, PolicyLoadError, type PolicyError, type PolicyWarning } from "./policy-error.ts";
import type { ParsedPolicies } from "./parsed-policies.ts";
import { PolicyFolder, type PolicySource, type PolicyText } from "./policy-source.ts";
import type { PodRestriction } from "../core/pod-restriction/pod-restriction.ts";
import { withUnresolvedTrustRoots } from "../core/trust-root/trust-root-references.ts";
import { bindProfileClusterWide, profileSources, shippedProfiles } from "./profiles.ts";

export interface LoadedPolicies {
  policies: PolicySet;
  /** Where the documents came from (files relative to the folder given). */
  origins: string[];
  /** What loaded but denies in part: rules whose trust root the set does not hold. */
  warnings: PolicyWarning[];
}

/** Loads every policy of `source` (a folder or file path, or any PolicySource). Throws PolicyLoadError. */
export async function loadPolicies(source: string | PolicySource): Promise<LoadedPolicies> {
  const from = typeof source === "string" ? new PolicyFolder(source) : source;
  const { texts, errors } = await from.read();
  const profiles = profileSources(await shippedProfiles());
  const policies = mutableSet();
  // Files that policies name beside them (a TrustRoot's `path: corp-trusted-root.json`) are their data, not
  // policies, though the folder holds them among the policies: unless one holds a policy after all, what it gives
  // when read as one (errors: no apiVersion and kind) is left out.
  const named = new Set<string>();
  const results: Array<{ file?: string; parsed: ParsedPolicies }> = [];
  for (const { origin, text, related, parsed: compiled } of texts) {
    const noting = related && ((path: string) => (named.add(resolvePath(dirname(origin), path)), related(path)));
    const parsed = compiled ?? parsePolicyText(text, origin, { profiles, ...(noting ? { related: noting } : {}) });
    results.push({ ...(related ? { file: resolvePath(origin) } : {}), parsed });
  }
  const dataOnly = (r: (typeof results)[number]) => r.file !== undefined && named.has(r.file) && KIND_NAMES.every((k) => r.parsed.policies[k].length === 0);
  for (const result of results) {
    if (dataOnly(result)) continue;
    const { parsed } = result;
    errors.push(...parsed.errors);
    for (const k of KIND_NAMES) (policies[k] as CompiledPolicy[]).push(...parsed.policies[k]);
  }
  for (const k of KIND_NAMES) errors.push(...duplicateNames(k, policies[k]));
  if (errors.length > 0) throw new PolicyLoadError(withoutLocations(errors, texts));
  // Across kinds, once every document compiled: a trust root may be defined in any file of the set. One that is
  // missing (never written, deleted, or broken) makes the rules that need it deny, not the set fail.
  const resolved = withUnresolvedTrustRoots(policies.ImagePolicy, policies.TrustRoot);
  const warnings: PolicyWarning[] = resolved.unresolved.map((u) => ({
    origin: u.source?.origin ?? "?",
    ...(u.source?.document !== undefined ? { document: u.source.document } : {}),
    path: u.path,
    message: u.message,
    reason: "TrustRootNotFound",
  }));
  return {
    policies: { ...policies, ImagePolicy: resolved.policies },
    origins: texts.filter((_, i) => !dataOnly(results[i]!)).map((t) => t.origin),
    warnings: withoutLocations(warnings, texts),
  };
}

/** Errors of texts that are not what the user wrote (custom resources) name the field, not a line or document. */
function withoutLocations<E extends PolicyError>(errors: E[], texts: readonly PolicyText[]): E[] {
  const unlocated = new Set(texts.filter((t) => t.locations === false).map((t) => t.origin));
  if (unlocated.size === 0) return errors;
  // `line` and `document` are optional in every PolicyError: without them an E is still an E.
  return errors.map(({ line, document, ...e }) =>
    unlocated.has(e.origin) ? (e as E) : ({ ...e, ...(document !== undefined ? { document } : {}), ...(line !== undefined ? { line } : {}) } as E),
  );
}

function mutableSet(): { [K in KindName]: CompiledPolicy[] } & PolicySet {
  return emptyPolicySet() as { [K in KindName]: CompiledPolicy[] } & PolicySet;
}

/** Names are unique per kind, and a namespaced kind's per namespace (its compiled names are "namespace/name"). */
function duplicateNames(kind: KindName, policies: readonly CompiledPolicy[]): PolicyError[] {
  const errors: PolicyError[] = [];
  const seen = new Map<string, CompiledPolicy>();
  for (const p of policies) {
    const before = seen.get(p.name);
    if (before) {
      errors.push({
        origin: p.source?.origin ?? "?",
        ...(p.source?.document !== undefined ? { document: p.source.document } : {}),
        path: "metadata.name",
        message: `${documentKindOf(kind, p)} ${JSON.stringify(p.name)} is already defined in ${before.source?.origin ?? "?"}`,
      });
    }
    seen.set(p.name, p);
  }
  return errors;
}

/** Parses one origin's text (pure). `profiles` are the raw profile documents a PodRestriction may include. */
export function parsePolicyText(
  text: string,
  origin: string,
  opts: { profiles?: ReadonlyMap<string, unknown>; related?: (relativePath: string) => string } = {},
): ParsedPolicies {
  const errors: PolicyError[] = [];
  const policies = mutableSet();
  // Read as kubectl reads it (YAML 1.1, merge keys); empty documents are left out.
  const parsed = readKubeYaml(text);
  for (const e of parsed.errors) errors.push({ origin, document: e.document, line: e.line, message: `YAML: ${e.message}` });
  parsed.documents.forEach(({ value, document, lineOf }) => {
    const startLine = lineOf([]);
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      errors.push({ origin, document, line: startLine, message: "a policy document must be a mapping with apiVersion and kind" });
      return;
    }
    const obj = value as Record<string, unknown>;
    const at = (path: Array<string | number>) => lineOf(path) ?? startLine;
    const kind = compilerOf(obj.apiVersion, obj.kind);
    if (!kind) {
      errors.push(unknownKind(obj, origin, document, at));
      return;
    }
    const compiled = kind.compile(obj, {
      source: { origin, document },
      ...(opts.profiles ? { profiles: opts.profiles } : {}),
      ...(opts.related ? { related: opts.related } : {}),
    });
    for (const e of compiled.issues) errors.push({ origin, document, line: at(e.path), path: formatPath(e.path), message: e.message });
    if (compiled.policy && compiled.issues.length === 0) (policies[kind.list] as CompiledPolicy[]).push(compiled.policy);
  });
  return { policies, errors };
}

/** A kind we know under another apiVersion says which versions it takes; an unknown kind lists the known ones. */
function unknownKind(obj: Record<string, unknown>, origin: string, document: number, at: (path: Array<string | number>) => number | undefined): PolicyError {
  const versions = typeof obj.kind === "string" ? apiVersionsOf(obj.kind) : undefined;
  if (versions) {
    const expected = versions.length === 1 ? JSON.stringify(versions[0]) : `one of ${versions.map((v) => JSON.stringify(v)).join(", ")}`;
    return { origin, document, line: at(["apiVersion"]), path: "apiVersion", message: `must be ${expected}, got ${JSON.stringify(obj.apiVersion ?? null)}` };
  }
  if (!DOCUMENT_KIND_NAMES.some((k) => apiVersionsOf(k)!.includes(obj.apiVersion as string))) {
    const versions = [...new Set(DOCUMENT_KIND_NAMES.flatMap((k) => apiVersionsOf(k)!))];
    return {
      origin,
      document,
      line: at(["apiVersion"]),
      path: "apiVersion",
      message: `must be ${JSON.stringify(versions[0])}, got ${JSON.stringify(obj.apiVersion ?? null)}`,
    };
  }
  return {
    origin,
    document,
    line: at(["kind"]),
    path: "kind",
    message: `unknown kind ${JSON.stringify(obj.kind ?? null)}; known kinds: ${DOCUMENT_KIND_NAMES.join(", ")}`,
  };
}

/**
 * The policies of `source` with shipped profiles bound cluster-wide in front of its PodRestrictions (`--profile`).
 * Throws PolicyLoadError for an invalid set or an unknown profile.
 */
export async function loadPoliciesWithProfiles(source: string | PolicySource, profiles: readonly string[]): Promise<LoadedPolicies> {
  const bound = await bindProfiles(profiles);
  const loaded = await loadPolicies(source);
  if (bound.length === 0) return loaded;
  return { ...loaded, policies: { ...loaded.policies, PodRestriction: [...bound, ...loaded.policies.PodRestriction] } };
}

async function bindProfiles(names: readonly string[]): Promise<PodRestriction[]> {
  if (names.length === 0) return [];
  const profiles = await shippedProfiles();
  return names.map((name) => bindProfileClusterWide(name, profiles));
}
