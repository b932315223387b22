// `imprimatur install` and `imprimatur uninstall` (src/install/): the flags, the image's build and push, the one line
// per step, and what a failed step prints.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { parseImageReference } from "../core/image-reference.ts";
import { buildImage } from "../image-build/build-image.ts";
import { pushLayout } from "../image-build/push-layout.ts";
import { InstallError, InstallStepError } from "../install/install-error.ts";
import { install, type BuiltAndPushed } from "../install/install.ts";
import { Kubectl } from "../install/kubectl.ts";
import { uninstall } from "../install/uninstall.ts";
import { RegistryClient } from "../registry/registry-client.ts";
import { signImage } from "../release/sign-image.ts";
import { readSigningKey, type ReleaseKey } from "../release/signing-key.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { registryAccess } from "./registry-access.ts";

const CLUSTER_FLAGS = `      --kubeconfig FILE    the kubeconfig kubectl reads (default: kubectl's own: $KUBECONFIG, ~/.kube/config)
      --context NAME       the kubeconfig context (default: the current one)
      --kubectl FILE       the kubectl to run (default: kubectl on PATH); install renders and applies with it
  -n, --namespace NS       Imprimatur's namespace (default: the manifests' own, imprimatur)
  -k, --kustomize DIR      a kustomization to install instead of the shipped one (an overlay of deploy/base,
                           as in docs/install.md); the image is set to the pushed one whatever it names
      --timeout SECONDS    for each wait (CRDs, rollout, deletion); default 300`;

export const INSTALL_USAGE = `Usage: imprimatur install --registry REPOSITORY [options]

Installs Imprimatur in the cluster of the current kubeconfig context, one line per step:
  image     builds the container image (as npm run image) and pushes it to REPOSITORY with Imprimatur's
            registry client; a refused push stops here and the cluster is not touched
  sign      with --signing-key: signs the pushed image and attaches its SBOM and build provenance as OCI
            referrers (as imprimatur sign-image does)
  render    the shipped install for the cluster's version (deploy/base; deploy/overlays/kube-1.20 before
            v1.21), or --kustomize DIR, with the image by digest
  crds      the CustomResourceDefinitions, applied and waited for until Established
  policies  the default policies (deploy/default-policies), created where absent, never overwritten
  apply     the rest; on a first install the webhooks at failurePolicy Ignore (an upgrade over enforcing
            webhooks keeps them enforcing)
  rollout   the Deployment ready; readyz: /readyz through the apiserver
  probe     one server-side dry-run pod create that only Imprimatur's webhook denies: the apiserver reaches it
  enforce   the webhooks as configured (failurePolicy Fail)
A failed step says what to run next; before enforce, the webhooks ignore failures and the cluster admits pods.
Running install again upgrades: a new build rolls out without a refused admission.

      --registry REPOSITORY  where to push the image: registry.example.com/platform/imprimatur (no tag)
      --tag TAG            the tag pushed (default: the package version)
      --authfile FILE      registry credentials (default: $REGISTRY_AUTH_FILE, else $DOCKER_CONFIG/config.json,
                           else ~/.docker/config.json, when present)
      --registries FILE    RegistryConfig: the registry's CA, insecure (plain HTTP), allowLocalAddresses
      --signing-key FILE   sign the pushed image with this release key (an unencrypted ECDSA P-256 PEM), its SBOM
                           and provenance attached, before anything is applied (docs/release-signing.md)
      --no-default-policies  do not create the default policies
      --probe-namespace NS   a namespace the webhooks cover, for the probe (default: default)
${CLUSTER_FLAGS}
      --dry-run            build the image and print what would be applied; push and apply nothing
  -o, --output FORMAT      text (default: one line per step), yaml or json (with --dry-run: the objects)
  -h, --help               show this help

Exit status: 0 installed (or printed), 1 a step failed (said on standard error), 2 usage errors.
`;

export const UNINSTALL_USAGE = `Usage: imprimatur uninstall [options]

Removes what install applied, one line per step: the webhook configurations first (a half-removed install
never has webhooks calling a Service with no replicas), then the Deployment, Service, RBAC and namespace.
The CustomResourceDefinitions stay, with every policy, TrustRoot and report in them, unless --purge.

      --purge              also delete the CustomResourceDefinitions (and so every policy and report)
${CLUSTER_FLAGS}
  -h, --help               show this help

Exit status: 0 removed, 1 a step failed (said on standard error), 2 usage errors.
`;

const OUTPUTS = ["text", "yaml", "json"] as const;

const clusterOptions = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
  kubectl: { type: "string" },
  namespace: { type: "string", short: "n" },
  kustomize: { type: "string", short: "k" },
  timeout: { type: "string", default: "300" },
} as const;

function timeoutOf(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError(`--timeout must be a whole number of seconds, got ${value}`);
  return Number(value);
}

function kubectlOf(values: { kubeconfig?: string; context?: string; kubectl?: string }): Kubectl {
  return new Kubectl({
    ...(values.kubectl !== undefined ? { binary: values.kubectl } : {}),
    ...(values.kubeconfig !== undefined ? { kubeconfig: values.kubeconfig } : {}),
    ...(values.context !== undefined ? { context: values.context } : {}),
  });
}

/** The credentials file container tools use, in their order of precedence, when it exists. */
export function defaultAuthFile(): string | undefined {
  const candidates = [
    process.env.REGISTRY_AUTH_FILE,
    process.env.DOCKER_CONFIG ? join(process.env.DOCKER_CONFIG, "config.json") : undefined,
    join(homedir(), ".docker", "config.json"),
  ];
  return candidates.find((c): c is string => c !== undefined && c !== "" && existsSync(c));
}

const report = (step: string, text: string) => process.stdout.write(`${step.padEnd(9)} ${text}\n`);

function reportFailure(command: string, e: unknown): number {
  if (e instanceof InstallError) {
    process.stderr.write(`imprimatur ${command}: ${e.message}\n`);
    return 1;
  }
  if (!(e instanceof InstallStepError)) throw e;
  process.stderr.write(`imprimatur ${command}: ${e.code} failed: ${e.message}\n  next: ${e.next}\n  cluster: ${e.clusterState}\n`);
  return 1;
}

export async function runInstall(argv: string[]): Promise<number> {
  let values;
  let repository: { registry: string; repository: string; name: string };
  let output: (typeof OUTPUTS)[number];
  let timeoutSeconds: number;
  let signingKey: ReleaseKey | undefined;
  try {
    values = parseCommandArgs(argv, {
      ...clusterOptions,
      registry: { type: "string" },
      tag: { type: "string" },
      authfile: { type: "string" },
      registries: { type: "string" },
      "signing-key": { type: "string" },
      "no-default-policies": { type: "boolean" },
      "probe-namespace": { type: "string", default: "default" },
      "dry-run": { type: "boolean" },
      output: { type: "string", short: "o", default: "text" },
    }).values;
    if (values.registry === undefined)
      throw new UsageError("give the repository to push the image to with --registry (registry.example.com/platform/imprimatur)");
    const parsed = parseImageReference(values.registry);
    if (!parsed.ok) throw new UsageError(`--registry ${values.registry}: ${parsed.error}`);
    if (parsed.ref.tag !== undefined || parsed.ref.digest !== undefined)
      throw new UsageError(`--registry names a repository, without a tag or digest (the tag is --tag), got ${values.registry}`);
    repository = { registry: parsed.ref.registry, repository: parsed.ref.repository, name: values.registry };
    if (!OUTPUTS.includes(values.output as (typeof OUTPUTS)[number]))
      throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    output = values.output as (typeof OUTPUTS)[number];
    if (output !== "text" && !values["dry-run"])
      throw new UsageError(`-o ${output} prints the objects of a --dry-run; without it install prints one line per step`);
    timeoutSeconds = timeoutOf(values.timeout!);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("install", e.message);
    throw e;
  }
  // The key is read before anything is built: a key that cannot sign stops install before it starts.
  try {
    if (values["signing-key"] !== undefined) signingKey = readSigningKey(values["signing-key"]);
  } catch (e) {
    process.stderr.write(`imprimatur install: ${errorText(e)}\n`);
    return 2;
  }
  const dryRun = values["dry-run"] === true;
  // With -o yaml|json the objects go to standard output; the step lines then go to standard error.
  const say = output === "text" ? report : (step: string, text: string) => process.stderr.write(`${step.padEnd(9)} ${text}\n`);

  const buildAndPush = async (): Promise<BuiltAndPushed> => {
    const workDir = mkdtempSync(join(tmpdir(), "imprimatur-install-"));
    try {
      const built = await buildImage({ outputDir: join(workDir, "image"), ...(values.tag !== undefined ? { tag: values.tag } : {}) });
      const builtAt = new Date();
      say("image", `built imprimatur ${built.version} (revision ${built.revision}): ${built.digest}`);
      if (dryRun) return { image: `${repository.name}@${built.digest}` };
      const authFile = values.authfile ?? defaultAuthFile();
      const access = await registryAccess({ ...(values.registries ? { registries: values.registries } : {}), ...(authFile ? { authFile } : {}) });
      const client = new RegistryClient({
        ...(access.registries ? { settings: access.registries } : {}),
        ...(access.staticCredentials ? { credentials: access.staticCredentials } : {}),
        requestTimeoutMs: timeoutSeconds * 1000,
      });
      try {
        const pushed = await pushLayout(client, built.layoutDir, built.tag, repository, built.tag);
        say("image", `pushed ${repository.name}:${built.tag}@${pushed.digest} (${pushed.uploadedBlobs} blobs sent, ${pushed.reusedBlobs} already there)`);
        if (signingKey) {
          const signed = await signImage(client, {
            image: { ...repository, digest: pushed.digest },
            key: signingKey,
            imprimaturVersion: built.version,
            sourceRevision: built.revision,
            buildCommand: "imprimatur install",
            builtAt,
          });
          const where = signed.referrersIndex ? `listed in the referrers tag ${signed.referrersIndex.tag}` : "listed by the registry's Referrers API";
          say("sign", `${signed.referrers.map((r) => `${r.part} ${r.digest}`).join(", ")} attached, signed by key ${signed.key}; ${where}`);
        }
        return { image: `${repository.name}@${pushed.digest}` };
      } finally {
        await client.close();
      }
    } finally {
      rmSync(workDir, { recursive: true, force: true });
    }
  };

  try {
    const result = await install({
      kubectl: kubectlOf(values),
      image: buildAndPush,
      ...(values.kustomize !== undefined ? { kustomizeDir: values.kustomize } : {}),
      ...(values.namespace !== undefined ? { namespace: values.namespace } : {}),
      defaultPolicies: values["no-default-policies"] !== true,
      probeNamespace: values["probe-namespace"]!,
      timeoutSeconds,
      dryRun,
      report: say,
    });
    if (dryRun) {
      if (output === "json") process.stdout.write(`${JSON.stringify({ apiVersion: "v1", kind: "List", items: result.objects }, null, 2)}\n`);
      else if (output === "yaml") process.stdout.write(result.objects.map((o) => stringify(o)).join("---\n"));
      else for (const o of result.objects) report("would", `apply ${o.kind}/${o.metadata.name}${o.metadata.namespace ? ` in ${o.metadata.namespace}` : ""}`);
      return 0;
    }
    report("installed", `${result.image}`);
    return 0;
  } catch (e) {
    return reportFailure("install", e);
  }
}

export async function runUninstall(argv: string[]): Promise<number> {
  let values;
  let timeoutSeconds: number;
  try {
    values = parseCommandArgs(argv, { ...clusterOptions, purge: { type: "boolean" } }).values;
    timeoutSeconds = timeoutOf(values.timeout!);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("uninstall", e.message);
    throw e;
  }
  try {
    await uninstall({
      kubectl: kubectlOf(values),
      ...(values.kustomize !== undefined ? { kustomizeDir: values.kustomize } : {}),
      ...(values.namespace !== undefined ? { namespace: values.namespace } : {}),
      purge: values.purge === true,
      timeoutSeconds,
      report,
    });
    report("removed", "Imprimatur no longer reviews anything in this cluster");
    return 0;
  } catch (e) {
    return reportFailure("uninstall", e);
  }
}
