// `imprimatur install`: build the image, push it, and install Imprimatur so that no step can leave the cluster
// refusing pods. The order:
//   build     the image, as `npm run image` builds it (reproducible: the same checkout gives the same digest)
//   push      to --registry with Imprimatur's registry client; a refused push stops here, the cluster untouched
//   render    the kustomization (the shipped one for the cluster's version, or --kustomize), image by digest
//   crds      applied, then waited for until Established
//   policies  the default policies, created where absent (never overwriting a policy the user changed)
//   apply     everything else; the webhook configurations with failurePolicy Ignore on a first install (an
//             upgrade over enforcing webhooks keeps them enforcing: the rolling update keeps ready replicas)
//   rollout   the Deployment's replicas ready
//   readyz    /readyz through the apiserver's service proxy (the path the apiserver's webhook calls take)
//   probe     one server-side dry-run pod create whose image reference is invalid: only Imprimatur's webhook
//             denying it proves the apiserver reaches Imprimatur (with Ignore, a failed call would admit it)
//   enforce   the webhook configurations as configured (failurePolicy Fail in the shipped ones)
// Every step reports one line. A step that fails says what to run next; until `enforce`, the webhooks ignore
// failures, so the cluster admits pods as before.
import { DEFAULT_POLICIES_DIR, readObjects, renderKustomization, serverVersion, shippedInstallFor, type ServerVersion } from "./render.ts";
import { alreadyEnforcing, inNamespace, planInstall, webhooksOf, withFailurePolicy, type InstallPlan, type KubeObject } from "./install-plan.ts";
import { InstallError, InstallStepError, type InstallStep } from "./install-error.ts";
import type { Kubectl, KubectlResult } from "./kubectl.ts";

export interface BuiltAndPushed {
  /** REGISTRY/REPOSITORY@sha256:… */
  image: string;
}

export interface InstallOptions {
  kubectl: Kubectl;
  /** Builds and pushes the image (or, for a dry run, only builds it); reports its own lines. */
  image: () => Promise<BuiltAndPushed>;
  /** A kustomization to render instead of the shipped install. */
  kustomizeDir?: string;
  /** Imprimatur's namespace, when not the manifests' own. */
  namespace?: string;
  defaultPolicies: boolean;
  /** Where the probe pod is dry-run created: a namespace the webhooks cover. */
  probeNamespace: string;
  timeoutSeconds: number;
  dryRun: boolean;
  report: (step: string, text: string) => void;
}

export interface InstallResult {
  image: string;
  /** Everything install applies (or, with dryRun, would apply), in order, webhooks as configured. */
  objects: KubeObject[];
}

const UNTOUCHED = "nothing in the cluster was changed";
const ADMITTING = "the webhooks are at failurePolicy Ignore: the cluster admits pods as it did before install";
const WEBHOOKS_UNCHANGED = "no webhook configuration was changed: pods are admitted as before install";
const KEPT_ENFORCING = "the webhooks stay as they were, served by the replicas already running (a rolling update replaces them only with ready ones)";

export async function install(options: InstallOptions): Promise<InstallResult> {
  const { kubectl, report } = options;
  const { image } = await options.image().catch((e: unknown) => {
    throw new InstallStepError(
      "image",
      (e as Error).message,
      "fix the registry access named above (--registry, --authfile, --registries) and run install again",
      UNTOUCHED,
    );
  });

  const version = await serverVersion(kubectl);
  const reachable = "major" in version ? version : undefined;
  if ("unreachable" in version && !options.dryRun) {
    throw new InstallStepError("cluster", `cannot reach the cluster: ${version.unreachable}`, kubectl.command(["cluster-info"]), UNTOUCHED);
  }
  if ("unreachable" in version && options.kustomizeDir === undefined) {
    report("cluster", `not reachable (${version.unreachable.split("\n")[0]}): rendering the install for v1.21 and later`);
  }
  const source = options.kustomizeDir ?? shippedInstallFor(reachable);
  const { plan, policies } = await renderStep(options, source, image, reachable);
  const objects = [...plan.crds, ...policies, ...plan.workload, ...plan.webhookConfigurations];
  if (options.dryRun) return { image, objects };

  let clusterState = WEBHOOKS_UNCHANGED;
  const fail = (step: InstallStep, reason: string, next: string): never => {
    throw new InstallStepError(step, reason, next, clusterState);
  };

  if (reachable && reachable.minor < 21) {
    // Before v1.21 no namespace carries kubernetes.io/metadata.name, and the webhooks' namespaceSelector needs it
    // to leave kube-system alone (the kube-1.20 overlay's instructions).
    const labelled = await kubectl.run(["label", "namespace", "kube-system", "kubernetes.io/metadata.name=kube-system", "--overwrite"]);
    if (labelled.code !== 0) fail("cluster", `labelling kube-system failed: ${labelled.stderr.trim()}`, kubectl.command(["get", "namespace", "kube-system"]));
    report("cluster", `Kubernetes ${reachable.gitVersion}: kube-system labelled kubernetes.io/metadata.name=kube-system (set by Kubernetes itself from v1.21)`);
  }

  // CRDs first, Established before anything names their kinds.
  if (plan.crds.length > 0) {
    const applied = await apply(kubectl, plan.crds, options.timeoutSeconds);
    if (applied.code !== 0) fail("crds", `kubectl apply failed: ${applied.stderr.trim()}`, "check that your user may create CustomResourceDefinitions");
    const names = plan.crds.map((c) => `crd/${c.metadata.name}`);
    const established = await kubectl.run(["wait", "--for=condition=Established", `--timeout=${options.timeoutSeconds}s`, ...names], {
      timeoutMs: (options.timeoutSeconds + 10) * 1000,
    });
    if (established.code !== 0)
      fail("crds", `not Established: ${established.stderr.trim()}`, kubectl.command(["get", "crd", ...plan.crds.map((c) => c.metadata.name)]));
    report("crds", `${plan.crds.length} CustomResourceDefinitions applied and Established`);
  }

  // The replicas run with --require-policies: not ready until a policy is in force, so policies come first.
  if (policies.length > 0) {
    const created: string[] = [];
    const kept: string[] = [];
    for (const policy of policies) {
      const ref = `${policy.kind.toLowerCase()}/${policy.metadata.name}`;
      const exists = await kubectl.run(["get", ref, "-o", "name", ...namespaceArgs(policy)]);
      if (exists.code === 0) {
        kept.push(policy.metadata.name);
        continue;
      }
      const result = await kubectl.run(["create", "-f", "-"], { input: JSON.stringify(policy) });
      if (result.code !== 0 && !/AlreadyExists/.test(result.stderr))
        fail("policies", `creating ${ref} failed: ${result.stderr.trim()}`, kubectl.command(["get", ref]));
      created.push(policy.metadata.name);
    }
    report("policies", `default policies: ${describeNames("created", created)}; ${describeNames("kept as they are", kept)}`);
  }

  const current = await webhookConfigurationsInCluster(kubectl, plan);
  const upgrade = alreadyEnforcing(plan, current);
  const webhooks = upgrade ? plan.webhookConfigurations : withFailurePolicy(plan.webhookConfigurations, "Ignore");
  clusterState = upgrade ? KEPT_ENFORCING : ADMITTING;
  const applied = await apply(kubectl, [...plan.workload, ...webhooks], options.timeoutSeconds);
  if (applied.code !== 0) fail("apply", `kubectl apply failed: ${applied.stderr.trim()}`, "fix what kubectl names above and run install again");
  report(
    "apply",
    `${plan.workload.length + webhooks.length} objects applied in namespace ${plan.namespace}; ` +
      (upgrade
        ? "the webhooks stay enforcing (an upgrade: the rolling update keeps ready replicas)"
        : "webhooks at failurePolicy Ignore until Imprimatur answers"),
  );

  const deployment = `deployment/${plan.deployment.name}`;
  const rollout = await kubectl.run(["rollout", "status", deployment, "-n", plan.deployment.namespace, `--timeout=${options.timeoutSeconds}s`], {
    timeoutMs: (options.timeoutSeconds + 10) * 1000,
  });
  if (rollout.code !== 0) {
    fail(
      "rollout",
      `${deployment} not ready: ${(rollout.stderr || rollout.stdout).trim()}`,
      `${kubectl.command(["describe", "pods", "-n", plan.deployment.namespace, "-l", "app.kubernetes.io/name=imprimatur"])}; ${kubectl.command(["logs", "-n", plan.deployment.namespace, deployment])}`,
    );
  }
  report("rollout", `${deployment} rolled out in namespace ${plan.deployment.namespace}`);

  const readyzPath = `/api/v1/namespaces/${plan.service.namespace}/services/https:${plan.service.name}:${plan.service.port}/proxy/readyz`;
  const readyz = await retryUntil(
    options.timeoutSeconds,
    () => kubectl.run(["get", "--raw", readyzPath]),
    (r) => r.code === 0,
  );
  if (readyz.code !== 0) fail("readyz", `${readyzPath}: ${readyz.stderr.trim()}`, kubectl.command(["get", "--raw", readyzPath]));
  report("readyz", `service ${plan.service.namespace}/${plan.service.name} answers /readyz: ${readyz.stdout.trim().split("\n")[0] || "ok"}`);

  // Retried: a replica can be ready a moment before the caBundle that lets the apiserver trust it is written.
  const deniedByImprimatur = (r: KubectlResult) => plan.webhookNames.find((name) => r.stderr.includes(`admission webhook "${name}" denied the request`));
  const probe = await retryUntil(
    options.timeoutSeconds,
    () => probeAdmission(kubectl, options.probeNamespace),
    (r) => deniedByImprimatur(r) !== undefined,
  );
  const deniedBy = deniedByImprimatur(probe);
  if (!deniedBy) {
    fail(
      "probe",
      probe.code === 0
        ? `a dry-run pod with an invalid image in namespace ${options.probeNamespace} was admitted: the apiserver did not reach Imprimatur's webhooks (at Ignore, a failed call admits)`
        : `the dry-run pod create in namespace ${options.probeNamespace} failed without Imprimatur's answer: ${probe.stderr.trim()}`,
      `look for "failed calling webhook" in the apiserver's log; ${kubectl.command(["get", "endpoints", "-n", plan.service.namespace, plan.service.name])}; or pick a covered namespace with --probe-namespace`,
    );
  }
  report("probe", `a dry-run pod create in namespace ${options.probeNamespace} was denied by ${deniedBy}: the apiserver reaches Imprimatur`);

  if (!upgrade) {
    const enforced = await apply(kubectl, plan.webhookConfigurations, options.timeoutSeconds);
    if (enforced.code !== 0) fail("enforce", `kubectl apply failed: ${enforced.stderr.trim()}`, "run install again");
  }
  const policiesNow = plan.webhookConfigurations.flatMap((c) => webhooksOf(c).map((w) => `${w.name} ${w.failurePolicy ?? "Fail"}`));
  report("enforce", `webhooks as configured: ${policiesNow.join(", ")}`);
  return { image, objects };
}

async function renderStep(
  options: InstallOptions,
  source: string,
  image: string,
  version: ServerVersion | undefined,
): Promise<{ plan: InstallPlan; policies: KubeObject[] }> {
  let plan: InstallPlan;
  let policies: KubeObject[] = [];
  try {
    let objects = await renderKustomization(options.kubectl, source);
    const from = planInstall(objects, image).namespace;
    if (options.namespace !== undefined) objects = inNamespace(objects, from, options.namespace);
    plan = planInstall(objects, image);
    if (options.defaultPolicies) policies = await renderKustomization(options.kubectl, DEFAULT_POLICIES_DIR);
  } catch (e) {
    if (!(e instanceof InstallError)) throw e;
    throw new InstallStepError("render", e.message, "check the kustomization with: kubectl kustomize " + source, UNTOUCHED);
  }
  const where = version ? ` for Kubernetes ${version.gitVersion}` : "";
  options.report(
    "render",
    `${source}${where}: ${plan.crds.length + plan.workload.length + plan.webhookConfigurations.length} objects, namespace ${plan.namespace}, image ${image}`,
  );
  return { plan, policies };
}

async function webhookConfigurationsInCluster(kubectl: Kubectl, plan: InstallPlan): Promise<KubeObject[]> {
  const found: KubeObject[] = [];
  for (const c of plan.webhookConfigurations) {
    const result = await kubectl.run(["get", `${c.kind.toLowerCase()}/${c.metadata.name}`, "-o", "json", "--ignore-not-found"]);
    if (result.code === 0 && result.stdout.trim() !== "") found.push(...readObjects(result.stdout, c.kind));
  }
  return found;
}

/** A pod whose only image is not a valid reference: Imprimatur denies it whatever the policies say. */
function probeAdmission(kubectl: Kubectl, namespace: string): Promise<KubectlResult> {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "imprimatur-install-probe", namespace, labels: { "app.kubernetes.io/name": "imprimatur-install-probe" } },
    spec: { containers: [{ name: "probe", image: "install-probe.imprimatur.invalid/Not-A-Valid-Reference:probe" }] },
  };
  return kubectl.run(["create", "--dry-run=server", "-o", "name", "-f", "-"], { input: JSON.stringify(pod) });
}

const RETRY_INTERVAL_MS = 2_000;

/** Runs `attempt` until `done` says so or `timeoutSeconds` pass; returns the last result. */
async function retryUntil<T>(timeoutSeconds: number, attempt: () => Promise<T>, done: (result: T) => boolean): Promise<T> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const result = await attempt();
    if (done(result) || Date.now() + RETRY_INTERVAL_MS > deadline) return result;
    await new Promise((resolve) => setTimeout(resolve, RETRY_INTERVAL_MS));
  }
}

function apply(kubectl: Kubectl, objects: KubeObject[], timeoutSeconds: number): Promise<KubectlResult> {
  return kubectl.run(["apply", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
    timeoutMs: (timeoutSeconds + 10) * 1000,
  });
}

function namespaceArgs(object: KubeObject): string[] {
  return object.metadata.namespace !== undefined ? ["-n", object.metadata.namespace] : [];
}

function describeNames(what: string, names: string[]): string {
  return names.length === 0 ? `none ${what}` : `${names.length} ${what} (${names.join(", ")})`;
}
