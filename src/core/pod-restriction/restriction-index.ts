// Finds the PodRestrictions bound to a namespace without scanning all of them: policies are indexed by
// the namespaces they list, and by one requirement of their namespaceSelector that a namespace's labels
// must meet (a matchLabels pair, an In expression's values, or an Exists key), so a lookup touches only
// candidates whose binding can match. Selectors with none of these (only NotIn/DoesNotExist) match
// namespaces by what they lack; they are few in practice and are checked one by one.
import { matchesLabelSelector } from "../label-selector.ts";
import type { PodRestriction } from "./pod-restriction.ts";

export interface BoundRestrictions {
  /** Bound policies, in the order they were defined. */
  bound: PodRestriction[];
  /** Policies whose selector could not be decided because the namespace's labels are unknown. */
  undecided: PodRestriction[];
}

export class PodRestrictionIndex {
  readonly all: readonly PodRestriction[];
  /** Whether any policy needs namespace labels to decide its binding. */
  readonly usesSelectors: boolean;
  private readonly order = new Map<PodRestriction, number>();
  private readonly clusterWide: PodRestriction[] = [];
  private readonly byNamespace = new Map<string, PodRestriction[]>();
  private readonly byLabel = new Map<string, PodRestriction[]>();
  private readonly scanned: PodRestriction[] = [];

  constructor(policies: readonly PodRestriction[]) {
    this.all = policies;
    this.usesSelectors = policies.some((p) => p.namespaceSelector !== undefined);
    policies.forEach((p, i) => {
      this.order.set(p, i);
      if (p.namespaces) for (const ns of new Set(p.namespaces)) push(this.byNamespace, ns, p);
      else if (!p.namespaceSelector) this.clusterWide.push(p);
      else {
        const keys = equalityKeys(p);
        if (keys.length === 0) this.scanned.push(p);
        else for (const k of keys) push(this.byLabel, k, p);
      }
    });
  }

  bound(namespace: string, labels: Record<string, string> | undefined): BoundRestrictions {
    const bound: PodRestriction[] = [...this.clusterWide];
    const undecided: PodRestriction[] = [];
    const consider = (p: PodRestriction) => {
      if (!p.namespaceSelector) bound.push(p);
      else if (labels === undefined) undecided.push(p);
      else if (matchesLabelSelector(p.namespaceSelector, labels)) bound.push(p);
    };
    for (const p of this.byNamespace.get(namespace) ?? []) consider(p);
    if (labels === undefined) {
      const selectorOnly = new Set([...this.byLabel.values()].flat());
      undecided.push(...selectorOnly, ...this.scanned);
    } else {
      const seen = new Set<PodRestriction>();
      const visit = (candidates: PodRestriction[] | undefined) => {
        for (const p of candidates ?? []) {
          if (seen.has(p)) continue;
          seen.add(p);
          consider(p);
        }
      };
      for (const [k, v] of Object.entries(labels)) {
        visit(this.byLabel.get(labelKey(k, v)));
        visit(this.byLabel.get(labelKey(k, ANY_VALUE)));
      }
      for (const p of this.scanned) consider(p);
    }
    const byOrder = (a: PodRestriction, b: PodRestriction) => this.order.get(a)! - this.order.get(b)!;
    return { bound: bound.length > 1 ? bound.sort(byOrder) : bound, undecided: [...new Set(undecided)].sort(byOrder) };
  }
}

/** Label key=value pairs (or key=any) one of which a namespace must carry for the selector to match. */
function equalityKeys(p: PodRestriction): string[] {
  const sel = p.namespaceSelector!;
  const first = Object.entries(sel.matchLabels ?? {})[0];
  if (first) return [labelKey(first[0], first[1])];
  const exprs = sel.matchExpressions ?? [];
  const inExpr = exprs.find((e) => e.operator === "In" && (e.values?.length ?? 0) > 0);
  if (inExpr) return inExpr.values!.map((v) => labelKey(inExpr.key, v));
  const exists = exprs.find((e) => e.operator === "Exists");
  return exists ? [labelKey(exists.key, ANY_VALUE)] : [];
}

/** Stands for "any value" in the index; label values cannot contain NUL, so it never collides. */
const ANY_VALUE = "\u0000*";

function labelKey(k: string, v: string): string {
  return `${k}\u0000${v}`;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
