// Attestor entries name their trust root by `trustRoot:`; a name that no TrustRoot of the set (nor the embedded
// public-good root) answers to is refused when the set loads. At admission such an entry could only throw,
// which is "unavailable" and, under fail-open, an admission.
import { leafAttestors, type AttestorSet } from "../image-policy/attestors.ts";
import { DEFAULT_TRUST_ROOT } from "../image-policy/compile-attestors.ts";
import type { ImagePolicy } from "../image-policy/image-policy.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import type { TrustRoot } from "./trust-root-kind.ts";

export interface UnresolvedTrustRoot {
  policy: string;
  source?: PolicyOrigin;
  /** The entry's trustRoot field: "spec.rules[0].attestors[0].entries[1].keyless.trustRoot". */
  path: string;
  message: string;
}

/** Every attestor entry of the image policies whose trust root is neither loaded nor embedded. */
export function unresolvedTrustRoots(imagePolicies: readonly ImagePolicy[], trustRoots: readonly TrustRoot[]): UnresolvedTrustRoot[] {
  const available = new Set([DEFAULT_TRUST_ROOT, ...trustRoots.map((r) => r.name)]);
  const known = trustRoots.length > 0 ? `TrustRoots loaded: ${trustRoots.map((r) => r.name).join(", ")}` : "no TrustRoot is loaded";
  const found: UnresolvedTrustRoot[] = [];
  for (const policy of imagePolicies) {
    const check = (sets: readonly AttestorSet[], at: string) => {
      for (const leaf of leafAttestors(sets)) {
        if (available.has(leaf.trustRoot)) continue;
        found.push({
          policy: policy.name,
          ...(policy.source ? { source: policy.source } : {}),
          path: `${at}.${leaf.path}.${leaf.type}.trustRoot`,
          message: `ImagePolicy ${JSON.stringify(policy.name)}: trust root ${JSON.stringify(leaf.trustRoot)} is not loaded (${known}; ${DEFAULT_TRUST_ROOT} is embedded)`,
        });
      }
    };
    for (const rule of policy.rules) {
      const at = `spec.rules[${rule.index}]`;
      if (rule.attestors) check(rule.attestors, at);
      // An attestation without attestors of its own shares the rule's, already checked.
      for (const a of rule.attestations ?? []) if (a.attestors !== rule.attestors) check(a.attestors, `${at}.attestations[${a.index}]`);
    }
  }
  return found;
}
