// The CustomResourceDefinitions of the policy kinds (imprimatur.dev/v1alpha1; cluster-scoped, and the namespaced
// kinds NamespacedImagePolicy and NamespacedPodRestriction), with schemas converted from the JSON Schemas the
// kinds are checked with, so the API and the loader never disagree on a shape. `npm run crds` writes them to
// deploy/crds/; a unit test regenerates and compares. Pure.
import { posix } from "node:path";
import { stringify } from "yaml";
import imagePolicySchema from "../core/image-policy/image-policy.schema.json" with { type: "json" };
import podRestrictionSchema from "../core/pod-restriction/pod-restriction.schema.json" with { type: "json" };
import trustRootSchema from "../core/trust-root/trust-root.schema.json" with { type: "json" };
import policyExceptionSchema from "../core/policy-exception/policy-exception.schema.json" with { type: "json" };
import { toStructuralSchema, type OpenApiSchema } from "./crd-schema.ts";
import { MAX_RECORDED_DOCUMENT_BYTES } from "./status-conditions.ts";

export const POLICY_GROUP = "imprimatur.dev";
export const POLICY_VERSION = "v1alpha1";
export const POLICY_RESOURCE_CATEGORY = "imprimatur";

export interface PolicyResourceKind {
  kind: "ImagePolicy" | "PodRestriction" | "TrustRoot" | "NamespacedImagePolicy" | "NamespacedPodRestriction" | "PolicyException";
  plural: string;
  /** Short names checked against the built-in resources' (ing, pc, pdb, psp, …) and common add-ons' (Tekton's pr, tr). */
  shortNames: string[];
  /** The JSON Schema the kind is checked with, and where it lives (for the generated files' header). */
  schema: Record<string, unknown>;
  schemaFile: string;
  /** A namespaced kind: its CRD is scope Namespaced, and it is listed and watched across namespaces. */
  namespaced?: true;
}

/**
 * A namespaced kind's schema: its cluster kind's, without the fields that reach beyond the namespace (the loader
 * refuses them, saying why, when given: unknown fields reach it, see crd-schema.ts).
 */
function namespacedSchema(schema: Record<string, unknown>, kind: string, description: string, omit: ReadonlyArray<readonly string[]>): Record<string, unknown> {
  const copy = structuredClone(schema) as { properties: Record<string, { properties?: Record<string, unknown>; required?: string[] }> } & Record<
    string,
    unknown
  >;
  copy.title = `${kind} (imprimatur.dev/v1alpha1)`;
  copy.description = description;
  copy.properties.kind = { const: kind } as never;
  for (const path of omit) {
    const parent = path.slice(0, -1).reduce<Record<string, unknown>>((node, key) => (node.properties as Record<string, Record<string, unknown>>)[key]!, copy);
    const last = path.at(-1)!;
    delete (parent.properties as Record<string, unknown>)[last];
    if (Array.isArray(parent.required)) parent.required = parent.required.filter((r: string) => r !== last);
  }
  return copy;
}

export const POLICY_RESOURCE_KINDS: readonly PolicyResourceKind[] = [
  {
    kind: "ImagePolicy",
    plural: "imagepolicies",
    shortNames: ["imgpol"],
    schema: imagePolicySchema,
    schemaFile: "src/core/image-policy/image-policy.schema.json",
  },
  {
    kind: "PodRestriction",
    plural: "podrestrictions",
    shortNames: ["podres"],
    schema: podRestrictionSchema,
    schemaFile: "src/core/pod-restriction/pod-restriction.schema.json",
  },
  { kind: "TrustRoot", plural: "trustroots", shortNames: [], schema: trustRootSchema, schemaFile: "src/core/trust-root/trust-root.schema.json" },
  {
    kind: "NamespacedImagePolicy",
    plural: "namespacedimagepolicies",
    shortNames: ["nsimgpol"],
    schema: namespacedSchema(
      imagePolicySchema,
      "NamespacedImagePolicy",
      "Which images may run in this namespace, in addition to the cluster's ImagePolicies: every policy must allow an image, so it can only deny more. Rules are ordered; the first rule whose images match decides.",
      [
        ["spec", "namespaces"],
        ["spec", "namespaceSelector"],
        ["spec", "imagePaths"],
      ],
    ),
    schemaFile: "src/core/image-policy/image-policy.schema.json",
    namespaced: true,
  },
  {
    kind: "NamespacedPodRestriction",
    plural: "namespacedpodrestrictions",
    shortNames: ["nspodres"],
    schema: namespacedSchema(
      podRestrictionSchema,
      "NamespacedPodRestriction",
      "Restrictions every Pod of this namespace must satisfy, in addition to the cluster's PodRestrictions (a Drop policy: it can only deny more, and a cluster Accept policy does not exempt a pod from it).",
      [["binding"]],
    ),
    schemaFile: "src/core/pod-restriction/pod-restriction.schema.json",
    namespaced: true,
  },
  {
    kind: "PolicyException",
    plural: "policyexceptions",
    // None: Kyverno's PolicyException has "polex", and a cluster may run both.
    shortNames: [],
    schema: policyExceptionSchema,
    schemaFile: "src/core/policy-exception/policy-exception.schema.json",
    namespaced: true,
  },
];

/** A namespace name, as the API requires: a DNS label. */
const NAMESPACE_SCHEMA = {
  type: "string",
  pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
  maxLength: 63,
  description: "The namespace the policy applies in (required: a namespaced policy applies only there).",
};

/**
 * The JSON Schemas for editors of the namespaced kinds (`npm run crds` writes them beside the cluster kinds'
 * schemas, in the kinds' folders): the CRD's schema, plus the namespace in metadata, which an editor must ask for and a CRD cannot
 * describe. Keyed by the file they are written to, relative to the repository.
 */
export function namespacedEditorSchemas(): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  for (const k of POLICY_RESOURCE_KINDS) {
    if (!k.namespaced) continue;
    const slug = k.kind.replace(/(?<=[a-z])(?=[A-Z])/g, "-").toLowerCase();
    // A kind written namespaced from the start (PolicyException): its own schema is the editors' already.
    const file = posix.join(posix.dirname(k.schemaFile), `${slug}.schema.json`);
    if (k.schemaFile === file) continue;
    const schema = structuredClone(k.schema) as Record<string, unknown> & {
      properties: { metadata: { properties: Record<string, unknown>; required?: string[] } };
    };
    const metadata = schema.properties.metadata;
    metadata.properties = { name: metadata.properties.name, namespace: NAMESPACE_SCHEMA, ...metadata.properties };
    metadata.required = [...(metadata.required ?? []), "namespace"];
    const { $id: _clusterKindId, ...rest } = schema;
    out.set(file, { $id: `https://imprimatur.dev/schemas/v1alpha1/${slug}.json`, ...rest });
  }
  return out;
}

/** What Imprimatur writes under status: a Ready condition, the generation it was judged on, and what is in force. */
const STATUS_SCHEMA: OpenApiSchema = {
  type: "object",
  description: "Written by Imprimatur: whether this generation is in force, or why not.",
  properties: {
    observedGeneration: { type: "integer", format: "int64", description: "The generation the Ready condition was computed from." },
    inForce: {
      type: "object",
      description:
        "The generation in force and its policy as compiled: what a replica started while a later generation does not compile enforces. Whoever may write the status may change it.",
      required: ["generation"],
      properties: {
        generation: { type: "integer", format: "int64", minimum: 1 },
        document: {
          type: "string",
          // Characters, where the cap counts bytes: never less than what Imprimatur writes.
          maxLength: MAX_RECORDED_DOCUMENT_BYTES,
          description:
            "The policy document as compiled, as JSON. At most 256 KiB: a larger policy never comes into force (TooLarge). Absent only in records of Imprimatur versions that left out larger documents.",
        },
      },
    },
    conditions: {
      type: "array",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
      items: {
        type: "object",
        required: ["type", "status"],
        properties: {
          type: { type: "string", description: "Ready: the policy compiled and is in force." },
          status: { type: "string", enum: ["True", "False", "Unknown"] },
          observedGeneration: { type: "integer", format: "int64" },
          lastTransitionTime: { type: "string", format: "date-time" },
          reason: { type: "string" },
          message: { type: "string", description: "For an invalid policy: the field and what is wrong with it, as the loader reports it for a file." },
        },
      },
    },
  },
};

/** The CRD object for one kind. */
export function policyCrd(k: PolicyResourceKind): Record<string, unknown> {
  const converted = toStructuralSchema(k.schema);
  const properties = { ...(converted.properties as Record<string, OpenApiSchema>) };
  // The apiserver owns these: only their types may be given (metadata.name is a DNS subdomain already).
  properties.apiVersion = { type: "string" };
  properties.kind = { type: "string" };
  properties.metadata = { type: "object" };
  properties.status = STATUS_SCHEMA;
  const required = ((converted.required as string[] | undefined) ?? []).filter((r) => !["apiVersion", "kind", "metadata"].includes(r));
  const root: OpenApiSchema = {
    type: "object",
    ...(converted.description ? { description: converted.description } : {}),
    properties,
    ...(required.length > 0 ? { required } : {}),
    // Unknown top-level fields too reach the loader, which names them (see crd-schema.ts).
    "x-kubernetes-preserve-unknown-fields": true,
  };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${k.plural}.${POLICY_GROUP}`, labels: { "app.kubernetes.io/name": "imprimatur", "app.kubernetes.io/component": "policy-crds" } },
    spec: {
      group: POLICY_GROUP,
      scope: k.namespaced ? "Namespaced" : "Cluster",
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.kind.toLowerCase(),
        ...(k.shortNames.length > 0 ? { shortNames: k.shortNames } : {}),
        categories: [POLICY_RESOURCE_CATEGORY],
      },
      versions: [
        {
          name: POLICY_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
            { name: "Reason", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: { openAPIV3Schema: root },
        },
      ],
    },
  };
}

/** deploy/crds/: one file per CRD and the kustomization that lists them, by file name. */
export function renderCrdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const names: string[] = [];
  for (const k of POLICY_RESOURCE_KINDS) {
    const name = `${k.plural}.${POLICY_GROUP}.yaml`;
    names.push(name);
    const from = k.namespaced ? `${k.schemaFile} (without the fields a namespaced kind refuses)` : k.schemaFile;
    files.set(name, `# Generated by \`npm run crds\` from ${from}; do not edit.\n${stringify(policyCrd(k), { lineWidth: 0 })}`);
  }
  files.set(
    "kustomization.yaml",
    `# Generated by \`npm run crds\`; do not edit.\n${stringify({ apiVersion: "kustomize.config.k8s.io/v1beta1", kind: "Kustomization", resources: names }, { lineWidth: 0 })}`,
  );
  return files;
}
