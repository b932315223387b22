// Attestor entries name their trust root by `trustRoot:`. A name that no TrustRoot of the set (nor the embedded
// public-good root) answers to leaves the entry unable to verify anything. Refusing the whole set for it would
// let one deleted or broken TrustRoot switch off every policy that names it (deny rules and `default: deny`
// included), so only the rules that need the root change: each denies every image it matches, saying which root
// is missing, and the rest of its policy keeps enforcing. Denying, not failing verification: an entry that
// cannot verify would count as "unavailable", which a fail-open server admits.
import { leafAttestors, type AttestorSet } from "../image-policy/attestors.ts";
import { DEFAULT_TRUST_ROOT } from "../image-policy/compile-attestors.ts";
import type { ImagePolicy, ImageRule } from "../image-policy/image-policy.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import type { TrustRoot } from "./trust-root-kind.ts";

export interface UnresolvedTrustRoot {
  policy: string;
  source?: PolicyOrigin;
  /** The rule's index in spec.rules. */
  rule: number;
  /** The name no trust root answers to. */
  trustRoot: string;
  /** The entry's trustRoot field: "spec.rules[0].attestors[0].entries[1].keyless.trustRoot". */
  path: string;
  message: string;
}

/**
 * The image policies with every rule that needs a trust root the set does not hold made to deny what it matches
 * (`unverifiable`), and each attestor entry naming such a root. Policies and rules that need none are returned as
 * they are: compiled policies are shared between loads, so nothing is changed in place.
 */
export function withUnresolvedTrustRoots(
  imagePolicies: readonly ImagePolicy[],
  trustRoots: readonly TrustRoot[],
): { policies: ImagePolicy[]; unresolved: UnresolvedTrustRoot[] } {
  // A key or keyless entry needs a root's Sigstore part, a notary entry its Notation stores.
  const available: Available = {
    sigstore: new Set([DEFAULT_TRUST_ROOT, ...trustRoots.filter((r) => r.sigstore).map((r) => r.name)]),
    notation: new Set(trustRoots.filter((r) => r.notation).map((r) => r.name)),
    loaded: new Set(trustRoots.map((r) => r.name)),
  };
  const loaded = trustRoots.length > 0 ? `TrustRoots loaded: ${trustRoots.map((r) => r.name).join(", ")}` : "no TrustRoot is loaded";
  const known = `${loaded}; ${DEFAULT_TRUST_ROOT} is embedded`;
  const unresolved: UnresolvedTrustRoot[] = [];
  const policies = imagePolicies.map((policy) => {
    let changed = false;
    const rules = policy.rules.map((rule) => {
      const missing = missingRoots(rule, available);
      if (missing.length === 0) return rule;
      changed = true;
      for (const m of missing)
        unresolved.push({
          policy: policy.name,
          ...(policy.source ? { source: policy.source } : {}),
          rule: rule.index,
          trustRoot: m.trustRoot,
          path: m.path,
          message:
            `ImagePolicy ${JSON.stringify(policy.name)}: trust root ${JSON.stringify(m.trustRoot)} ${m.lacking ?? "is not loaded"} (${known}); ` +
            `rules[${rule.index}] denies every image it matches until it ${m.lacking ? "does" : "is"}`,
        });
      const names = [...new Set(missing.filter((m) => !m.lacking).map((m) => JSON.stringify(m.trustRoot)))];
      const why = [...new Set(missing.filter((m) => m.lacking).map((m) => `trust root ${JSON.stringify(m.trustRoot)} ${m.lacking}`))];
      if (names.length > 0) why.unshift(names.length === 1 ? `trust root ${names[0]} is not loaded` : `trust roots ${names.join(", ")} are not loaded`);
      return { ...rule, unverifiable: `${why.join("; ")} (${known}): this rule cannot verify signatures, so it denies every image it matches` };
    });
    return changed ? { ...policy, rules } : policy;
  });
  return { policies, unresolved };
}

interface Available {
  /** Roots with a Sigstore trusted root, the embedded one included. */
  sigstore: ReadonlySet<string>;
  /** Roots with Notation stores. */
  notation: ReadonlySet<string>;
  loaded: ReadonlySet<string>;
}

/**
 * The rule's attestor entries (its own, and its attestations') whose trust root is not available, with their field,
 * and what the root lacks when it is loaded without the part the entry needs.
 */
function missingRoots(rule: ImageRule, available: Available): Array<{ trustRoot: string; path: string; lacking?: string }> {
  const missing: Array<{ trustRoot: string; path: string; lacking?: string }> = [];
  const check = (sets: readonly AttestorSet[], at: string) => {
    for (const leaf of leafAttestors(sets)) {
      if (leaf.trustRoot === undefined) continue; // a notary entry with its own stores
      const part = leaf.type === "notary" ? available.notation : available.sigstore;
      if (part.has(leaf.trustRoot)) continue;
      const lacking = available.loaded.has(leaf.trustRoot)
        ? leaf.type === "notary"
          ? "holds no Notation certificates (spec.notation)"
          : "holds no Sigstore trusted root (spec.trustedRoot or spec.path)"
        : undefined;
      missing.push({ trustRoot: leaf.trustRoot, path: `${at}.${leaf.path}.${leaf.type}.trustRoot`, ...(lacking ? { lacking } : {}) });
    }
  };
  const at = `spec.rules[${rule.index}]`;
  if (rule.attestors) check(rule.attestors, at);
  // An attestation without attestors of its own shares the rule's, already checked.
  for (const a of rule.attestations ?? []) if (a.attestors !== rule.attestors) check(a.attestors, `${at}.attestations[${a.index}]`);
  return missing;
}
