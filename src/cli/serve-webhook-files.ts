// The webhook configurations (and ImagePolicyWebhook files) `serve` writes into the state folder for the state
// folder's CA, printed once at start, and rewritten when reloaded policies need other rules.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { ServerConfig } from "../config/server-config.ts";
import { policiesMutate } from "../core/image-policy/image-policy.ts";
import { policyCount, type PolicySet } from "../core/policy-set/policy-kinds.ts";
import { mayMatchResource, type WebhookResource } from "../core/policy-set/request-scope.ts";
import { writeFileAtomic } from "../fs/write-file-atomic.ts";
import { podNamespace } from "../kube/leader-election.ts";
import {
  renderAdmissionConfiguration,
  renderImagePolicyKubeconfig,
  imagePathResources,
  renderMutatingWebhookConfiguration,
  renderValidatingWebhookConfiguration,
  type WebhookOptions,
} from "../server/webhook-manifests.ts";

/** What the webhooks are sent for, by policy set. */
export type WebhookRules = (set: PolicySet) => WebhookOptions;

export function webhookRules(config: ServerConfig, opts: { policyCrds: boolean; podSecurity: boolean }): WebhookRules {
  // Webhook rules for resources that no policy's matchConstraints reach are left out, unless something else
  // reviews every pod (a remote backend) or policies may arrive later without a reload here (--policy-crds).
  // Pod Security Admission judges every pod and workload, whatever the policies are for.
  const narrowRules = config.backends.length === 0 && !opts.policyCrds && !opts.podSecurity;
  // The webhooks never call for kube-system (a cluster that cannot start its own pods cannot recover) nor for the
  // server's own namespace (its replicas must start while it is down).
  const ownNamespace = podNamespace();
  const excludeNamespaces = ["kube-system", ...(ownNamespace && ownNamespace !== "kube-system" ? [ownNamespace] : [])];
  return (set) => ({
    excludeNamespaces,
    // Custom resources the webhooks must see: pod templates from the config, image locations from the policies.
    customResources: [...config.podTemplates, ...imagePathResources(set.ImagePolicy.flatMap((p) => p.imagePaths ?? []))],
    ...(narrowRules && policyCount(set) > 0 ? { mayMatch: (r: WebhookResource) => mayMatchResource(set, r) } : {}),
    ...(opts.podSecurity ? { namespaces: true } : {}),
  });
}

/** The files in the state folder: written once the server has its CA, then kept in step with reloaded policies. */
export class WebhookConfigurationFiles {
  private readonly stateDir: string;
  private readonly rules: WebhookRules;
  /** Unset until the first files are written: a reload before then has nothing to rewrite. */
  private written: { generated: GeneratedFiles; logger: Logger } | undefined;

  constructor(stateDir: string, rules: WebhookRules) {
    this.stateDir = stateDir;
    this.rules = rules;
  }

  /** Writes the ready-to-apply configuration for `set` into the state folder and prints where it is, with the caBundle. */
  async write(baseUrl: string, caPem: string, set: PolicySet, createdCa: boolean, logger: Logger): Promise<void> {
    const generated = generatedFiles(this.stateDir, baseUrl, caPem, this.rules(set), set);
    await printWebhookConfiguration(this.stateDir, generated, caPem, createdCa);
    this.written = { generated, logger };
  }

  /** For the app's onPoliciesReloaded: undefined until the files are written. */
  policiesReloaded(set: PolicySet): Promise<void> | undefined {
    return this.written && this.rewrite(this.written, set);
  }

  // What the webhooks must see changes with the policies (matchConstraints, imagePaths): the files are rewritten,
  // and the operator told to apply them again, since the apiserver keeps the configuration it was given.
  private async rewrite({ generated, logger }: { generated: GeneratedFiles; logger: Logger }, set: PolicySet): Promise<void> {
    const { stateDir } = this;
    const next = generatedFiles(stateDir, generated.baseUrl, generated.caPem, this.rules(set), set);
    const changed = (["validating-webhook.yaml", "mutating-webhook.yaml"] as const).filter((f) => next.files[f] !== generated.files[f]);
    if (changed.length === 0) return;
    for (const f of changed) await writeOrRemove(join(stateDir, f), next.files[f]);
    generated.files = next.files;
    const written = changed.filter((f) => next.files[f] !== undefined);
    if (written.length > 0)
      logger.warn(
        { files: written.map((f) => join(stateDir, f)) },
        "the reloaded policies need other webhook rules: apply the rewritten configuration again (kubectl apply -f FILE), or the apiserver keeps sending what it sent before",
      );
    if (next.files["mutating-webhook.yaml"] === undefined)
      logger.warn(
        { file: join(stateDir, "mutating-webhook.yaml") },
        "no reloaded policy pins or verifies images any more: the mutating webhook is not needed (kubectl delete mutatingwebhookconfiguration imprimatur)",
      );
  }
}

/** Generated webhook configurations and the ImagePolicyWebhook files, by file name. */
interface GeneratedFiles {
  baseUrl: string;
  caPem: string;
  files: Record<"validating-webhook.yaml" | "imagepolicy-kubeconfig.yaml" | "admission-configuration.yaml", string> & {
    /** Absent when no policy pins or verifies images: a mutating webhook would change nothing, and only add a way to fail. */
    "mutating-webhook.yaml"?: string;
  };
}

function generatedFiles(stateDir: string, baseUrl: string, caPem: string, options: WebhookOptions, set: PolicySet): GeneratedFiles {
  const endpoint = { baseUrl, caPem };
  return {
    baseUrl,
    caPem,
    files: {
      "validating-webhook.yaml": renderValidatingWebhookConfiguration(endpoint, options),
      ...(policiesMutate(set.ImagePolicy) ? { "mutating-webhook.yaml": renderMutatingWebhookConfiguration(endpoint, options) } : {}),
      "imagepolicy-kubeconfig.yaml": renderImagePolicyKubeconfig(endpoint),
      "admission-configuration.yaml": renderAdmissionConfiguration({ kubeconfigPath: join(stateDir, "imagepolicy-kubeconfig.yaml") }),
    },
  };
}

/** Writes `text` to `path`, or removes the file when there is none (a configuration no longer generated). */
async function writeOrRemove(path: string, text: string | undefined): Promise<void> {
  if (text === undefined) await rm(path, { force: true });
  else await writeFileAtomic(path, text, 0o600);
}

/** Writes the ready-to-apply configuration into the state folder and prints where it is, with the caBundle. */
async function printWebhookConfiguration(stateDir: string, generated: GeneratedFiles, caPem: string, created: boolean) {
  await mkdir(stateDir, { recursive: true });
  const { files, baseUrl } = generated;
  for (const name of ["validating-webhook.yaml", "mutating-webhook.yaml", "imagepolicy-kubeconfig.yaml", "admission-configuration.yaml"] as const)
    await writeOrRemove(join(stateDir, name), files[name]);
  const caBundle = Buffer.from(caPem).toString("base64");
  const mutating = join(stateDir, "mutating-webhook.yaml");
  process.stderr.write(
    [
      created ? `Created a self-signed CA and serving certificate in ${stateDir} (ca.crt).` : `Using the CA in ${stateDir}/ca.crt.`,
      `caBundle: ${caBundle}`,
      `Webhook configuration for ${baseUrl} (kubectl apply -f ${join(stateDir, "validating-webhook.yaml")}):`,
      "---",
      files["validating-webhook.yaml"].trimEnd(),
      "---",
      files["mutating-webhook.yaml"] !== undefined
        ? `Tag→digest pinning and verified digests (digestMutate and attestor rules): kubectl apply -f ${mutating}`
        : "No policy pins or verifies images: no mutating webhook is needed (none written).",
      `ImagePolicyWebhook: --admission-control-config-file=${join(stateDir, "admission-configuration.yaml")} (kubeconfig: ${join(stateDir, "imagepolicy-kubeconfig.yaml")})`,
      "",
    ].join("\n"),
  );
}
