// `imprimatur uninstall`: the webhook configurations first, so that a half-removed install never has webhooks
// calling a Service with no replicas behind it (which, at failurePolicy Fail, refuses every pod), then the rest in
// reverse order of install. The CustomResourceDefinitions stay, and with them every policy, TrustRoot and report,
// unless --purge: deleting a CRD deletes all of its objects.
import { inNamespace, planInstall, type KubeObject } from "./install-plan.ts";
import { InstallError, InstallStepError, type InstallStep } from "./install-error.ts";
import type { Kubectl } from "./kubectl.ts";
import { renderKustomization, serverVersion, shippedInstallFor } from "./render.ts";

export interface UninstallOptions {
  kubectl: Kubectl;
  kustomizeDir?: string;
  namespace?: string;
  purge: boolean;
  timeoutSeconds: number;
  report: (step: string, text: string) => void;
}

const PLACEHOLDER_IMAGE = "imprimatur";

export async function uninstall(options: UninstallOptions): Promise<void> {
  const { kubectl, report } = options;
  const version = await serverVersion(options.kubectl);
  if (!("major" in version)) {
    throw new InstallStepError("cluster", `cannot reach the cluster: ${version.unreachable}`, kubectl.command(["cluster-info"]), "nothing was removed");
  }
  const source = options.kustomizeDir ?? shippedInstallFor(version);
  let objects: KubeObject[];
  try {
    objects = await renderKustomization(kubectl, source);
    if (options.namespace !== undefined) objects = inNamespace(objects, planInstall(objects, PLACEHOLDER_IMAGE).namespace, options.namespace);
  } catch (e) {
    if (!(e instanceof InstallError)) throw e;
    throw new InstallStepError("render", e.message, `kubectl kustomize ${source}`, "nothing was removed");
  }
  const plan = planInstall(objects, PLACEHOLDER_IMAGE);

  const remove = async (step: InstallStep, group: KubeObject[], state: string): Promise<void> => {
    if (group.length === 0) return;
    const result = await kubectl.run(["delete", "--ignore-not-found", "--wait=true", `--timeout=${options.timeoutSeconds}s`, "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: group }),
      timeoutMs: (options.timeoutSeconds + 10) * 1000,
    });
    if (result.code !== 0) throw new InstallStepError(step, `kubectl delete failed: ${result.stderr.trim()}`, "run uninstall again", state);
    const deleted = result.stdout.split("\n").filter((line) => / deleted$/.test(line)).length;
    report(
      step,
      `${deleted} of ${group.length} deleted (${group.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")})`.replace(/\(([^)]{160})[^)]+\)/, "($1…)"),
    );
  };
  await remove("webhooks", plan.webhookConfigurations, "nothing was removed");
  await remove("workload", [...plan.workload].reverse(), "the webhook configurations are gone: Imprimatur no longer reviews anything");
  if (options.purge) {
    await remove("crds", plan.crds, "Imprimatur is removed but for its CustomResourceDefinitions");
  } else {
    report("crds", `${plan.crds.length} CustomResourceDefinitions kept, with their policies and reports (--purge deletes them)`);
  }
}
