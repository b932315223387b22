// Ready-to-apply configuration for kube-apiserver: the Validating- and MutatingWebhookConfiguration, and the
// ImagePolicyWebhook's kubeconfig and AdmissionConfiguration. Pure renderers.
import { stringify } from "yaml";
import type { ImagePath } from "../core/image-paths.ts";
import { guessResource } from "../core/kind-resource.ts";
import type { WebhookResource } from "../core/policy-set/request-scope.ts";

export interface WebhookEndpoint {
  /** Base URL the apiserver reaches us at, e.g. https://imprimatur.imprimatur.svc:8443 */
  baseUrl: string;
  caPem: string;
}

export interface CustomTemplateResource {
  group: string;
  version: string;
  resource: string;
}

/**
 * The resources of the kinds that imagePaths name, so the webhooks see them. The resource is guessed from the
 * kind (kind-resource.ts: Task → tasks, Policy → policies); a missing group or version becomes "*".
 */
export function imagePathResources(paths: readonly ImagePath[]): CustomTemplateResource[] {
  const out = new Map<string, CustomTemplateResource>();
  for (const selector of paths.flatMap((p) => p.kinds)) {
    const r = { group: selector.group ?? "*", version: selector.version ?? "*", resource: guessResource(selector.kind) };
    out.set(`${r.group}/${r.version}/${r.resource}`, r);
  }
  return [...out.values()];
}

export interface WebhookOptions {
  failurePolicy?: "Fail" | "Ignore";
  timeoutSeconds?: number;
  customResources?: readonly CustomTemplateResource[];
  /** Whether some policy may be for a resource (policies' matchConstraints); absent: every resource is kept. */
  mayMatch?: (resource: WebhookResource) => boolean;
  /** Namespaces too (serve --pod-security: a tightened enforce label is answered with warnings, as PSA does). */
  namespaces?: boolean;
  /** Namespaces the webhooks never call for (by their kubernetes.io/metadata.name label): kube-system, the server's own. */
  excludeNamespaces?: readonly string[];
}

/**
 * What the apiserver does with these webhooks while the server does not answer, and how to undo them, said at
 * the top of each generated file: a configuration applied to try the server out, and left behind when it
 * stops, must not leave a cluster refusing every pod without anyone knowing why.
 */
function failureComment(kind: string, opts: WebhookOptions): string {
  const excluded = opts.excludeNamespaces ?? [];
  const policy = opts.failurePolicy ?? "Fail";
  const meaning =
    policy === "Fail"
      ? "while the apiserver cannot get an answer from this server (stopped, unreachable, slower than timeoutSeconds), it refuses every request these rules match"
      : "while the apiserver cannot get an answer from this server, it admits every request these rules match unreviewed";
  const outside = excluded.length > 0 ? `, outside the namespaces the namespaceSelector leaves out (${excluded.join(", ")})` : "";
  // Commands stay whole on their own lines, so they can be copied.
  const lines = [
    ...wrapComment(`failurePolicy: ${policy}: ${meaning}${outside}. Before stopping the server for good, remove this configuration first:`),
    `#   kubectl delete ${kind.toLowerCase()} imprimatur`,
  ];
  if (excluded.length > 0)
    lines.push(
      ...wrapComment("Kubernetes before 1.21 does not set the kubernetes.io/metadata.name label on namespaces: label them yourself, or they are not left out:"),
      ...excluded.map((ns) => `#   kubectl label namespace ${ns} kubernetes.io/metadata.name=${ns}`),
    );
  return lines.join("\n") + "\n";
}

/** `text` as "# " lines of at most about 110 characters. */
function wrapComment(text: string): string[] {
  const lines: string[] = [];
  let line = "#";
  for (const word of text.split(" ")) {
    if (line.length + word.length + 1 > 110 && line !== "#") {
      lines.push(line);
      line = "#";
    }
    line += ` ${word}`;
  }
  lines.push(line);
  return lines;
}

/**
 * Pods, their ephemeral containers, and every built-in kind with a pod template (so PodRestrictions fail
 * fast at the controller object, and controllers create pods from pinned templates), plus custom resources
 * registered with pod templates.
 */
function webhookRules(customResources: readonly CustomTemplateResource[] = [], mayMatch?: WebhookOptions["mayMatch"]) {
  const operations = ["CREATE", "UPDATE"];
  const rules = [
    {
      apiGroups: [""],
      apiVersions: ["v1"],
      operations,
      resources: ["pods", "pods/ephemeralcontainers", "replicationcontrollers", "podtemplates"],
      scope: "Namespaced",
    },
    { apiGroups: ["apps"], apiVersions: ["*"], operations, resources: ["deployments", "replicasets", "statefulsets", "daemonsets"], scope: "Namespaced" },
    { apiGroups: ["batch"], apiVersions: ["*"], operations, resources: ["jobs", "cronjobs"], scope: "Namespaced" },
    ...customResources.map((c) => ({ apiGroups: [c.group], apiVersions: [c.version], operations, resources: [c.resource], scope: "*" })),
  ];
  if (!mayMatch) return rules;
  // Resources no policy is for are left out, and rules left with none.
  return rules.flatMap((rule) => {
    const resources = rule.resources.filter((name) => {
      const [resource = "", subResource = ""] = name.split("/");
      return mayMatch({ group: rule.apiGroups[0]!, version: rule.apiVersions[0]!, resource, subResource });
    });
    return resources.length > 0 ? [{ ...rule, resources }] : [];
  });
}

/** Namespace creations and label changes, which Pod Security Admission checks (cluster-scoped). */
const NAMESPACES_RULE = { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["namespaces"], scope: "Cluster" };

function webhook(ep: WebhookEndpoint, name: string, path: string, opts: WebhookOptions) {
  return {
    name,
    admissionReviewVersions: ["v1"],
    // Events are the only side effect, and they are not written for dry runs.
    sideEffects: "NoneOnDryRun",
    failurePolicy: opts.failurePolicy ?? "Fail",
    timeoutSeconds: opts.timeoutSeconds ?? 10,
    clientConfig: { url: `${ep.baseUrl}${path}`, caBundle: Buffer.from(ep.caPem).toString("base64") },
    ...(opts.excludeNamespaces && opts.excludeNamespaces.length > 0
      ? { namespaceSelector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: [...opts.excludeNamespaces] }] } }
      : {}),
    rules: webhookRules(opts.customResources, opts.mayMatch),
  };
}

/** A webhook configuration named imprimatur, under the comment that says what its failure policy does. */
function configuration(kind: "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration", webhooks: unknown[], opts: WebhookOptions): string {
  return failureComment(kind, opts) + stringify({ apiVersion: "admissionregistration.k8s.io/v1", kind, metadata: { name: "imprimatur" }, webhooks });
}

export function renderValidatingWebhookConfiguration(ep: WebhookEndpoint, opts: WebhookOptions = {}): string {
  const validating = webhook(ep, "images.imprimatur.dev", "/validate", opts);
  if (opts.namespaces) validating.rules.push(NAMESPACES_RULE);
  return configuration("ValidatingWebhookConfiguration", [validating], opts);
}

/**
 * The tag→digest pinning webhook (/mutate). Reinvoked when a later mutating webhook changes the object, so
 * an image injected by, say, a sidecar injector is pinned too.
 */
export function renderMutatingWebhookConfiguration(ep: WebhookEndpoint, opts: WebhookOptions = {}): string {
  return configuration("MutatingWebhookConfiguration", [{ ...webhook(ep, "pins.imprimatur.dev", "/mutate", opts), reinvocationPolicy: "IfNeeded" }], opts);
}

/** The kubeconfig the ImagePolicyWebhook plugin uses: the cluster server is the full ImageReview URL. */
export function renderImagePolicyKubeconfig(ep: WebhookEndpoint, client?: { certPem: string; keyPem: string }): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "imprimatur", cluster: { server: `${ep.baseUrl}/imagereview`, "certificate-authority-data": Buffer.from(ep.caPem).toString("base64") } },
    ],
    users: [
      {
        name: "kube-apiserver",
        user: client
          ? { "client-certificate-data": Buffer.from(client.certPem).toString("base64"), "client-key-data": Buffer.from(client.keyPem).toString("base64") }
          : {},
      },
    ],
    contexts: [{ name: "imprimatur", context: { cluster: "imprimatur", user: "kube-apiserver" } }],
    "current-context": "imprimatur",
  });
}

export interface ImagePolicyWebhookSettings {
  kubeconfigPath: string;
  allowTTLSeconds?: number;
  denyTTLSeconds?: number;
  retryBackoffMs?: number;
  defaultAllow?: boolean;
}

/** AdmissionConfiguration for --admission-control-config-file (apiserver.config.k8s.io/v1). */
export function renderAdmissionConfiguration(s: ImagePolicyWebhookSettings): string {
  return stringify({
    apiVersion: "apiserver.config.k8s.io/v1",
    kind: "AdmissionConfiguration",
    plugins: [
      {
        name: "ImagePolicyWebhook",
        configuration: {
          imagePolicy: {
            kubeConfigFile: s.kubeconfigPath,
            allowTTL: s.allowTTLSeconds ?? 3600,
            denyTTL: s.denyTTLSeconds ?? 30,
            retryBackoff: s.retryBackoffMs ?? 500,
            defaultAllow: s.defaultAllow ?? false,
          },
        },
      },
    ],
  });
}
