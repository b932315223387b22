// Policies of the tenant tests (namespaced-policy-reach): a cluster ImagePolicy, and team-a's namespaced policies
// scoped by a matchCondition that fails on every pod without labels (team-a's own mistake).

/** The cluster's ImagePolicy: Docker Hub is denied everywhere, everything else allowed. */
export const NO_DOCKER_HUB = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-docker-hub}
spec:
  rules:
    - {action: deny, images: ["docker.io/*"], message: "Docker Hub is not allowed"}
  default: allow
`;

/** A condition that errors ("field not found: labels") on an object without labels. */
const TEAM_PODS = `  matchConditions:
    - {name: team-pods, expression: "object.metadata.labels['team'] == 'a'"}
`;

/** team-a's NamespacedImagePolicy team-images and NamespacedPodRestriction team-unprivileged, both scoped by TEAM_PODS. */
export const TEAM_A_FAILING_CONDITION = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: team-images, namespace: team-a}
spec:
${TEAM_PODS}  rules:
    - {action: allow, images: ["registry.example.com/*"]}
  defaultMessage: team-a runs images of registry.example.com only
---
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedPodRestriction
metadata: {name: team-unprivileged, namespace: team-a}
spec:
${TEAM_PODS}  spec:
    containers:
      - securityContext: { privileged: { allowNil: true, require: false } }
`;

/** How team-a's image policy denies when its condition fails, failing closed. */
export const TEAM_A_CONDITION_ERROR = /NamespacedImagePolicy team-a\/team-images matchConditions\[team-pods\]: matchCondition "team-pods" failed/;
