// Several clusters may share one server, and each may hold policy resources of its own (serve --policy-crds with
// --cluster-kubeconfig): its admins' ImagePolicies, PodRestrictions and TrustRoots, its namespace owners'
// namespaced policies. They are that cluster's: a request of the cluster is judged by the server's policies that
// cover it and by the cluster's own, and no other cluster's request ever sees them. Pure: the engine merges the
// sets when a cluster's requests first need them, and again after either set reloads.
//
// One merged set serves a cluster's requests, so its names must not collide:
//   - the cluster's ImagePolicies and PodRestrictions are named "CLUSTER:NAME" ("CLUSTER:NAMESPACE/NAME" for a
//     namespaced one), in decisions and audit records too, so that a policy "default" of the server and one of
//     the cluster stay two policies (and two entries of the verification cache);
//   - TrustRoots are looked up by name when a signature is verified, in the merged set. A cluster's policies were
//     resolved against its own TrustRoots (and the embedded public-good root) when its set loaded, the server's
//     against the server's. The server's names and the public-good root's stay the server's, so a cluster cannot
//     define one of those names: its rules that name it deny every image they match, saying why, and the
//     server's policies keep their root. A rule of the server's that names a root the server lacks was made to
//     deny at the server's load, so a cluster's TrustRoot of that name is never used for it.
import { leafAttestors, type AttestorSet } from "../image-policy/attestors.ts";
import { DEFAULT_TRUST_ROOT } from "../image-policy/compile-attestors.ts";
import type { ImagePolicy, ImageRule } from "../image-policy/image-policy.ts";
import { coversCluster } from "../cluster-scope.ts";
import type { PolicySet } from "./policy-kinds.ts";

/** How a cluster's own policy appears in decisions: "CLUSTER:NAME". */
export function clusterPolicyName(cluster: string, name: string): string {
  return `${cluster}:${name}`;
}

/**
 * The set a request of `cluster` is judged by when the cluster has policy resources of its own (`own`): the
 * server's policies that cover it (never the server's namespaced ones, which are its own cluster's), and the
 * cluster's own, renamed, that do not narrow themselves away (a `spec.clusters` that does not name `cluster`).
 */
export function withClusterOwnPolicies(server: PolicySet, own: PolicySet, cluster: string): PolicySet {
  const fromServer = policiesForCluster(server, cluster, false);
  const reserved = new Set([DEFAULT_TRUST_ROOT, ...server.TrustRoot.map((r) => r.name)]);
  const ownRoots = own.TrustRoot.filter((r) => !reserved.has(r.name));
  const shadowed = new Set(own.TrustRoot.filter((r) => reserved.has(r.name)).map((r) => r.name));
  const covers = (p: { readonly clusters?: readonly string[] }) => coversCluster(p, cluster);
  const ownImagePolicies = own.ImagePolicy.filter(covers).map((p) => ({
    ...withShadowedRootsDenied(p, shadowed, cluster),
    name: clusterPolicyName(cluster, p.name),
  }));
  const ownPodRestrictions = own.PodRestriction.filter(covers).map((p) => ({ ...p, name: clusterPolicyName(cluster, p.name) }));
  return {
    ...fromServer,
    ImagePolicy: [...fromServer.ImagePolicy, ...ownImagePolicies],
    PodRestriction: [...fromServer.PodRestriction, ...ownPodRestrictions],
    TrustRoot: [...fromServer.TrustRoot, ...ownRoots],
  };
}

/** `policy` with each rule that names a shadowed trust root made to deny what it matches, saying why. */
function withShadowedRootsDenied(policy: ImagePolicy, shadowed: ReadonlySet<string>, cluster: string): ImagePolicy {
  if (shadowed.size === 0) return policy;
  let changed = false;
  const rules = policy.rules.map((rule) => {
    const names = [...new Set(rootsOf(rule).filter((n) => shadowed.has(n)))];
    if (names.length === 0) return rule;
    changed = true;
    const which = names.map((n) => JSON.stringify(n)).join(", ");
    const unverifiable =
      `cluster ${JSON.stringify(cluster)}'s TrustRoot ${which} has a name the server's own trust roots hold (they are shared by every ` +
      `cluster, as is ${JSON.stringify(DEFAULT_TRUST_ROOT)}): rename it; this rule cannot verify signatures, so it denies every image it matches`;
    return { ...rule, unverifiable };
  });
  return changed ? { ...policy, rules } : policy;
}

/** The trust roots a rule's attestor entries name, its attestations' included. */
function rootsOf(rule: ImageRule): string[] {
  const sets: AttestorSet[] = [...(rule.attestors ?? []), ...(rule.attestations ?? []).flatMap((a) => a.attestors)];
  return leafAttestors(sets).flatMap((leaf) => (leaf.type === "notary" ? [] : [leaf.trustRoot]));
}

/** Whether any policy of the set is scoped to clusters (when none is, every cluster sees the whole set). */
export function isClusterScoped(set: PolicySet): boolean {
  return set.ImagePolicy.some((p) => p.clusters !== undefined) || set.PodRestriction.some((p) => p.clusters !== undefined);
}

/**
 * The policies a request from `cluster` is judged by: those scoped to no cluster, and those naming it. A namespaced
 * policy (one with a namespace) belongs to the server's own cluster, whose namespaces' owners write it: it judges
 * that cluster's requests only (`home`), whatever its spec.clusters names, so a tenant of one cluster never
 * decides for a namespace of the same name in another.
 */
export function policiesForCluster(set: PolicySet, cluster: string | undefined, home = true): PolicySet {
  const covers = (p: { readonly clusters?: readonly string[]; readonly namespace?: string | undefined }) =>
    coversCluster(p, cluster) && (home || p.namespace === undefined);
  return { ...set, ImagePolicy: set.ImagePolicy.filter(covers), PodRestriction: set.PodRestriction.filter(covers) };
}

/** Whether any policy is namespaced (a namespace owner's: the server's own cluster's only). */
export function hasNamespacedPolicies(set: PolicySet): boolean {
  return set.ImagePolicy.some((p) => p.namespace !== undefined) || set.PodRestriction.some((p) => p.namespace !== undefined);
}
