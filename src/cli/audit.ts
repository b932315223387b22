// `imprimatur audit`: the background scan's judgment, once, from the command line: every running pod of a cluster
// (a kubeconfig's), judged as it runs (the digests its status reports) by the same engine and policy set `serve`
// builds from the same flags, with signatures verified against the registries. Exit 0 when no pod breaks a
// policy, 1 when one does (a fail result; warn and error results are listed but do not fail), 2 on usage errors,
// policy-load errors and an unreachable cluster.
import { stringify } from "yaml";
import { loadServerConfig, DEFAULT_SERVER_CONFIG } from "../config/server-config.ts";
import type { ScanResult } from "../core/policy-reports/resource-scan.ts";
import { Engine } from "../engine/engine.ts";
import { buildEngine } from "../engine/engine-builder.ts";
import { describeApiError, KubeApiError, kubeApiErrorCode } from "../kube/api-requests.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import { loadKubeClient } from "../kube/kube-connection.ts";
import { NamespaceLabelCache } from "../kube/namespace-label-cache.ts";
import { PodInformer } from "../kube/pod-informer.ts";
import { loadPolicySet, policySetSource } from "../policy/policy-set.ts";
import { auditPod, type PodAudit } from "../scan/pod-audit.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { registryAccess } from "./registry-access.ts";
import { pino } from "pino";

export const AUDIT_USAGE = `Usage: imprimatur audit [--kubeconfig FILE] [--policies DIR] [--profile NAME] [options]

Judges the pods running in a cluster, as "serve --background-scan" does: each pod as it runs (every image at
the digest its status reports), by the same policy set "imprimatur serve" loads from the same --policies and
--profile, with signatures verified against the registries. Finds pods admitted while a backend was down,
pods that kept running after a policy changed, static pods, and pods whose running digest is not the one
admission verified or pinned. Pods are judged as created by no particular user.

  --kubeconfig FILE    the cluster (default: $KUBECONFIG, else in-cluster when running in a pod)
  -n, --namespace NS   only this namespace (default: every namespace)
  -l, --selector SEL   only pods with these labels (a label selector, as for kubectl)
  --policies DIR       policy folder or file (default: the embedded default policy, as for serve)
  --profile NAME       bind a shipped PodRestriction profile to every namespace (repeatable; NAME@v1.25
                       for a Pod Security Standards policy version)
  --config FILE        ServerConfig: remote backends, failurePolicy, registries, podTemplates
  --registries FILE    RegistryConfig: per-registry CA, client certificate, plain HTTP, mirrors, and the hosts
                       on local addresses that may be reached (allowLocalAddresses; others are refused)
  --authfile FILE      registry credentials tried after a pod's pull secrets
  --allow-empty        judge with an empty policy set (by default refused, as serve refuses to start)
  --exceptions-namespace NS
                       honour the PolicyExceptions of this namespace in the policies, as serve does (repeatable);
                       a failure one sets aside is listed as skip
  -o, --output FORMAT  text (default: one line per finding and a summary), json or yaml
  -h, --help           show this help

Exit code: 0 no pod breaks a policy, 1 some pod does, 2 usage, policy or cluster errors.
`;

const OUTPUTS = ["text", "json", "yaml"] as const;
type Output = (typeof OUTPUTS)[number];

export async function runAudit(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseCommandArgs(argv, {
      kubeconfig: { type: "string" },
      namespace: { type: "string", short: "n" },
      selector: { type: "string", short: "l" },
      policies: { type: "string" },
      profile: { type: "string", multiple: true, default: [] },
      config: { type: "string" },
      registries: { type: "string" },
      authfile: { type: "string" },
      "allow-empty": { type: "boolean", default: false },
      "exceptions-namespace": { type: "string", multiple: true, default: [] },
      output: { type: "string", short: "o", default: "text" },
    }));
    if (!OUTPUTS.includes(values.output as Output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    if (values.namespace !== undefined && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(values.namespace))
      throw new UsageError(`--namespace ${JSON.stringify(values.namespace)} is not a namespace name`);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("audit", e.message);
    throw e;
  }

  const logger = pino({ level: "silent" });
  let engine: Engine | undefined;
  let namespaces: NamespaceLabelCache | undefined;
  let kube: KubeClient | undefined;
  try {
    const config = values.config ? await loadServerConfig(values.config) : structuredClone(DEFAULT_SERVER_CONFIG);
    if (values.registries) config.registries = values.registries;
    if (values.authfile) config.authFile = values.authfile;
    // As kubectl: --kubeconfig, else $KUBECONFIG (its first file), else the pod's service account.
    const kubeconfig = values.kubeconfig ?? config.kubeconfig ?? process.env.KUBECONFIG?.split(":")[0];
    if (!kubeconfig && !process.env.KUBERNETES_SERVICE_HOST) return usageFailure("audit", "no cluster: give --kubeconfig FILE (or set KUBECONFIG)");
    kube = loadKubeClient(kubeconfig);
    const { policies } = await loadPolicySet(policySetSource(values.policies === undefined ? undefined : [values.policies]), {
      profiles: values.profile!,
      allowEmpty: values["allow-empty"]!,
    });
    namespaces = new NamespaceLabelCache(kube, { logger });
    await namespaces.start();
    engine = await buildEngine({
      config,
      policies,
      namespaces,
      kube,
      logger,
      exceptionNamespaces: values["exceptions-namespace"]!,
      ...(await registryAccess(config)),
    });
    const informer = new PodInformer(
      kube,
      { upsert: () => {}, remove: () => {}, keep: (pod) => pod, listed: () => {} },
      {
        logger,
        ...(values.namespace ? { namespace: values.namespace } : {}),
        ...(values.selector ? { labelSelector: values.selector } : {}),
      },
    );
    let pods;
    try {
      pods = await informer.list();
    } catch (e) {
      throw new KubeApiError(kubeApiErrorCode(e), `cannot list pods: ${describeApiError(e)}`, { cause: e });
    }
    const audits: PodAudit[] = [];
    for (const pod of pods) audits.push(await auditPod(engine, pod));
    const output = values.output as Output;
    const report = auditReport(audits);
    process.stdout.write(output === "json" ? `${JSON.stringify(report, null, 2)}\n` : output === "yaml" ? stringify(report) : renderAuditText(audits));
    return report.summary.failed > 0 ? 1 : 0;
  } catch (e) {
    process.stderr.write(`imprimatur audit: ${errorText(e)}\n`);
    return 2;
  } finally {
    await engine?.close();
    await namespaces?.close();
    await kube?.close();
  }
}

export interface AuditSummary {
  pods: number;
  /** Pods with no finding but failures set aside (skip). */
  passed: number;
  /** Pods with a fail result. */
  failed: number;
  /** Pods with warn results only. */
  warned: number;
  /** Pods with an error result and no fail. */
  errors: number;
}

export function summarizeAudits(audits: readonly PodAudit[]): AuditSummary {
  const has = (a: PodAudit, r: ScanResult["result"]) => a.results.some((x) => x.result === r);
  return {
    pods: audits.length,
    passed: audits.filter((a) => a.results.every((r) => r.result === "skip")).length,
    failed: audits.filter((a) => has(a, "fail")).length,
    warned: audits.filter((a) => !has(a, "fail") && !has(a, "error") && has(a, "warn")).length,
    errors: audits.filter((a) => !has(a, "fail") && has(a, "error")).length,
  };
}

export function auditReport(audits: readonly PodAudit[]) {
  return {
    pods: audits
      .filter((a) => a.results.length > 0)
      .map((a) => ({
        namespace: a.resource.namespace,
        name: a.resource.name,
        uid: a.resource.uid,
        results: a.results.map(({ timestamp: _timestamp, ...r }) => r),
      })),
    summary: summarizeAudits(audits),
  };
}

/** One line per finding (`NAMESPACE/POD: fail: policy rule: message (image@digest)`) and a summary. */
export function renderAuditText(audits: readonly PodAudit[]): string {
  const lines: string[] = [];
  for (const a of audits)
    for (const r of a.results) {
      const image = r.properties?.image
        ? ` (${r.properties.image}${r.properties.digest && !r.properties.image.includes("@") ? `@${r.properties.digest}` : ""})`
        : "";
      lines.push(`${a.resource.namespace}/${a.resource.name}: ${r.result}: ${r.policy}${r.rule ? ` ${r.rule}` : ""}: ${r.message}${image}`);
    }
  const s = summarizeAudits(audits);
  lines.push(
    `${s.pods} pod${s.pods === 1 ? "" : "s"}: ${s.passed} passed, ${s.failed} failed` +
      `${s.warned > 0 ? `, ${s.warned} warned` : ""}${s.errors > 0 ? `, ${s.errors} with errors` : ""}`,
  );
  return `${lines.join("\n")}\n`;
}
