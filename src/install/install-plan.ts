// What `imprimatur install` applies, in which order, decided from the rendered kustomization alone (pure: no
// cluster, no files). The objects fall into three groups applied one after another — the CRDs (waited for until
// Established), everything else, and the webhook configurations — and the webhook configurations come in two
// forms: with failurePolicy Ignore while the replicas start (a broken install then admits instead of refusing
// every pod), and as configured once one real admission has gone through Imprimatur.
import { InstallError } from "./install-error.ts";

/** One rendered Kubernetes object. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

export interface Webhook {
  name: string;
  failurePolicy?: string;
  clientConfig?: { service?: { namespace?: string; name?: string; port?: number; path?: string } };
  namespaceSelector?: { matchExpressions?: Array<{ key: string; operator: string; values?: string[] }> };
  [key: string]: unknown;
}

export interface InstallPlan {
  /** Imprimatur's namespace: where its Deployment runs. */
  namespace: string;
  crds: KubeObject[];
  /** Everything but the CRDs and the webhook configurations, in the order rendered. */
  workload: KubeObject[];
  /** The webhook configurations as configured (their failurePolicy as the manifests say). */
  webhookConfigurations: KubeObject[];
  /** The Deployment that serves the webhooks. */
  deployment: { namespace: string; name: string };
  /** The Service the webhooks call, for /readyz through the apiserver's service proxy. */
  service: { namespace: string; name: string; port: number };
  /** Every webhook's name: what kubectl quotes when one of them denies ("admission webhook "…" denied"). */
  webhookNames: string[];
}

const WEBHOOK_KINDS = new Set(["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]);
const CONTAINER_NAME = "imprimatur";
export const DEFAULT_NAMESPACE = "imprimatur";

/**
 * Splits the rendered objects into the plan, with `image` as the imprimatur container's image. Refuses a
 * rendering without exactly one Deployment running the imprimatur container, or without webhook configurations
 * calling a Service: install could not tell when Imprimatur is ready.
 */
export function planInstall(objects: KubeObject[], image: string): InstallPlan {
  const crds: KubeObject[] = [];
  const workload: KubeObject[] = [];
  const webhookConfigurations: KubeObject[] = [];
  for (const object of objects) {
    if (object.kind === "CustomResourceDefinition") crds.push(object);
    else if (WEBHOOK_KINDS.has(object.kind)) webhookConfigurations.push(object);
    else workload.push(object);
  }
  const deployments = workload.filter((o) => o.kind === "Deployment" && containersOf(o).some((c) => c.name === CONTAINER_NAME));
  if (deployments.length !== 1) {
    throw new InstallError("manifests", `the manifests must hold one Deployment with a container named ${CONTAINER_NAME}; they hold ${deployments.length}`);
  }
  const deployment = deployments[0]!;
  const withImage = workload.map((o) => (o === deployment ? setContainerImage(o, image) : o));
  const webhooks = webhookConfigurations.flatMap(webhooksOf);
  const service = webhooks.find((w) => w.clientConfig?.service?.name !== undefined)?.clientConfig?.service;
  if (webhooks.length === 0 || service === undefined) {
    throw new InstallError("manifests", "the manifests hold no webhook configuration calling a Service (clientConfig.service)");
  }
  const namespace = deployment.metadata.namespace ?? DEFAULT_NAMESPACE;
  return {
    namespace,
    crds,
    workload: withImage,
    webhookConfigurations,
    deployment: { namespace, name: deployment.metadata.name },
    service: { namespace: service.namespace ?? namespace, name: service.name!, port: service.port ?? 443 },
    webhookNames: webhooks.map((w) => w.name),
  };
}

/** The webhook configurations with every webhook at `failurePolicy`. */
export function withFailurePolicy(configurations: KubeObject[], failurePolicy: "Ignore"): KubeObject[] {
  return configurations.map((c) => ({ ...c, webhooks: webhooksOf(c).map((w) => ({ ...w, failurePolicy })) }));
}

/**
 * Whether the cluster's webhook configurations (as read back) already enforce what the plan configures: the same
 * webhooks, each at its configured failurePolicy. Then an upgrade keeps them so, with no window of Ignore.
 */
export function alreadyEnforcing(plan: InstallPlan, inCluster: KubeObject[]): boolean {
  const current = new Map(inCluster.flatMap((c) => webhooksOf(c).map((w) => [`${c.kind}/${c.metadata.name}/${w.name}`, w.failurePolicy ?? "Fail"] as const)));
  return plan.webhookConfigurations.every((c) =>
    webhooksOf(c).every((w) => current.get(`${c.kind}/${c.metadata.name}/${w.name}`) === (w.failurePolicy ?? "Fail")),
  );
}

/**
 * The objects moved from Imprimatur's namespace `from` to `to` (install -n): the Namespace itself, every namespaced
 * object in it, the ServiceAccount subjects of bindings, the webhooks' Service and the namespaceSelector that
 * exempts Imprimatur's own namespace, and serve's arguments that name it (--tls-secret NS/NAME, --tls-san
 * NAME.NS.svc, --scan-exclude-namespace NS, --leader-election-namespace NS).
 */
export function inNamespace(objects: KubeObject[], from: string, to: string): KubeObject[] {
  if (from === to) return objects;
  const rename = (value: string): string => (value === from ? to : value);
  return objects.map((original) => {
    const o = structuredClone(original);
    if (o.kind === "Namespace" && o.metadata.name === from) {
      o.metadata.name = to;
      if (o.metadata.labels?.["kubernetes.io/metadata.name"] === from) o.metadata.labels["kubernetes.io/metadata.name"] = to;
    }
    if (o.metadata.namespace === from) o.metadata.namespace = to;
    if (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding") {
      for (const subject of (o.subjects as Array<{ namespace?: string }> | undefined) ?? []) {
        if (subject.namespace !== undefined) subject.namespace = rename(subject.namespace);
      }
    }
    if (WEBHOOK_KINDS.has(o.kind)) {
      for (const w of webhooksOf(o)) {
        const service = w.clientConfig?.service;
        if (service?.namespace !== undefined) service.namespace = rename(service.namespace);
        for (const expression of w.namespaceSelector?.matchExpressions ?? []) {
          if (expression.key === "kubernetes.io/metadata.name" && expression.values) expression.values = expression.values.map(rename);
        }
      }
    }
    if (o.kind === "Deployment") {
      for (const container of containersOf(o)) {
        if (Array.isArray(container.args)) container.args = container.args.map((arg, i, all) => renameInArgument(arg, all[i - 1], from, to));
      }
    }
    return o;
  });
}

/** serve's flags whose value is a namespace (a bare NS elsewhere can be any other name: --webhook-configuration). */
const NAMESPACE_FLAGS = new Set(["--scan-exclude-namespace", "--leader-election-namespace"]);

function renameInArgument(arg: unknown, flag: unknown, from: string, to: string): unknown {
  if (typeof arg !== "string") return arg;
  if (arg === from) return typeof flag === "string" && NAMESPACE_FLAGS.has(flag) ? to : arg;
  if (arg.startsWith(`${from}/`)) return `${to}/${arg.slice(from.length + 1)}`;
  return arg.replace(new RegExp(`\\.${from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.svc(?=$|\\.)`), `.${to}.svc`);
}

export function webhooksOf(configuration: KubeObject): Webhook[] {
  return Array.isArray(configuration.webhooks) ? (configuration.webhooks as Webhook[]) : [];
}

interface Container {
  name?: string;
  image?: string;
  args?: unknown[];
}

function containersOf(deployment: KubeObject): Container[] {
  const spec = deployment.spec as { template?: { spec?: { containers?: Container[] } } } | undefined;
  return spec?.template?.spec?.containers ?? [];
}

function setContainerImage(deployment: KubeObject, image: string): KubeObject {
  const copy = structuredClone(deployment);
  for (const container of containersOf(copy)) if (container.name === CONTAINER_NAME) container.image = image;
  return copy;
}
