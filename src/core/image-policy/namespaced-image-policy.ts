// NamespacedImagePolicy: an ImagePolicy its namespace's owners write, compiled into the ImagePolicy list and
// applying only in its namespace (see namespaced-policy.ts). ImagePolicies combine by AND, so it can only deny
// more: its `default: allow` or break-glass never sets aside a cluster policy's denial.
import type { FieldIssue, CompileContext } from "../policy-kind.ts";
import { isObject } from "../primitives/json-shapes.ts";
import { namespacedPolicyName, readNamespacedDocument, SCOPE_IS_THE_NAMESPACE } from "../namespaced-policy.ts";
import { imagePolicyKind } from "./image-policy-kind.ts";
import type { ImagePolicy } from "./image-policy.ts";

export const NAMESPACED_IMAGE_POLICY = "NamespacedImagePolicy";

const REFUSED = [
  { path: ["spec", "namespaces"], why: SCOPE_IS_THE_NAMESPACE },
  { path: ["spec", "namespaceSelector"], why: SCOPE_IS_THE_NAMESPACE },
  { path: ["spec", "imagePaths"], why: "image locations in custom resources extend the image extraction for every namespace" },
] as const;

export function compileNamespacedImagePolicy(document: Record<string, unknown>, cx: CompileContext): { policy?: ImagePolicy; issues: FieldIssue[] } {
  const read = readNamespacedDocument(document, { namespaced: NAMESPACED_IMAGE_POLICY, cluster: "ImagePolicy" }, REFUSED);
  if (!read.namespaced) return { issues: read.issues };
  const { namespace, clusterDocument } = read.namespaced;
  const issues = foreignSecretRefs(clusterDocument.spec, ["spec"], namespace);
  const compiled = imagePolicyKind.compile(clusterDocument, cx);
  issues.push(...compiled.issues);
  if (!compiled.policy || issues.length > 0) return { issues };
  const policy: ImagePolicy = { ...compiled.policy, name: namespacedPolicyName(namespace, compiled.policy.name), namespace, namespaces: [namespace] };
  return { policy, issues };
}

/** The fields through which a policy names a Secret: a static key's, and a notary entry's certificate stores. */
const SECRET_REF_FIELDS = new Set(["keyRef", "certsRef", "signingAuthorityCertsRef", "tsaCertsRef"]);

/**
 * Keys and certificates in Kubernetes Secrets (`keyRef: k8s://NAMESPACE/SECRET`, `certsRef: …`) must be in the
 * policy's own namespace: the server reads them with its own identity, and a namespace owner must not make it read
 * another namespace's Secrets.
 */
function foreignSecretRefs(value: unknown, path: Array<string | number>, namespace: string): FieldIssue[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => foreignSecretRefs(v, [...path, i], namespace));
  if (!isObject(value)) return [];
  return Object.entries(value).flatMap(([key, v]) => {
    if (SECRET_REF_FIELDS.has(key) && typeof v === "string" && v.startsWith("k8s://")) {
      const refNamespace = /^k8s:\/\/([^/]*)/.exec(v)![1];
      return refNamespace === namespace
        ? []
        : [
            {
              path: [...path, key],
              message: `names a Secret in namespace ${JSON.stringify(refNamespace)}; a ${NAMESPACED_IMAGE_POLICY} may only use Secrets of its own namespace (k8s://${namespace}/…)`,
            },
          ];
    }
    return foreignSecretRefs(v, [...path, key], namespace);
  });
}
