// `serve --tls-secret` and its companions, from flags to a SelfManagedTlsSetup: where the Secret, the webhook
// configurations and the Lease are, who this replica is, and (hidden, for tests) a shortened rotation timeline.
import type { KubeClient } from "../kube/kube-client.ts";
import type { Logger } from "pino";
import { parseDuration } from "../core/primitives/duration.ts";
import { defaultCandidateIdentity, podNamespace } from "../kube/leader-election.ts";
import { parseSecretName, startSelfManagedTls, type RunningSelfManagedTls, type SelfManagedTlsSetup } from "./tls-secret-manager.ts";
import { parseRotationTimeline } from "./tls-rotation-plan.ts";
import { TlsError } from "./tls-error.ts";

export interface TlsSecretFlags {
  "tls-secret"?: string | undefined;
  "webhook-configuration"?: string | undefined;
  "leader-election-namespace"?: string | undefined;
  "leader-election-id"?: string | undefined;
  "tls-timeline"?: string | undefined;
  "tls-sync-interval"?: string | undefined;
}

export const DEFAULT_WEBHOOK_CONFIGURATION = "imprimatur";
export const DEFAULT_LEADER_ELECTION_ID = "imprimatur";

const DNS_LABEL_OR_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** Checks the flags that need no cluster; the message names the flag. undefined when all is well. */
export function tlsSecretFlagProblem(flags: TlsSecretFlags, hasCertificateFiles: boolean): string | undefined {
  const secret = flags["tls-secret"];
  if (secret === undefined) {
    for (const flag of ["webhook-configuration", "leader-election-namespace", "leader-election-id", "tls-timeline", "tls-sync-interval"] as const)
      if (flags[flag] !== undefined) return `--${flag} needs --tls-secret`;
    return undefined;
  }
  if (hasCertificateFiles) return "--tls-secret and --tls-cert/--tls-key are alternatives";
  try {
    parseSecretName(secret);
    if (flags["tls-timeline"] !== undefined) parseRotationTimeline(flags["tls-timeline"]);
  } catch (e) {
    return (e as Error).message;
  }
  for (const flag of ["webhook-configuration", "leader-election-namespace", "leader-election-id"] as const) {
    const value = flags[flag];
    if (value !== undefined && !DNS_LABEL_OR_SUBDOMAIN.test(value)) return `--${flag} must be a lowercase DNS name, got ${JSON.stringify(value)}`;
  }
  const sync = flags["tls-sync-interval"];
  if (sync !== undefined && !((parseDuration(sync) ?? 0) > 0)) return `--tls-sync-interval must be a positive duration, got ${sync}`;
  return undefined;
}

/** The setup for startSelfManagedTls; call after tlsSecretFlagProblem found nothing. */
export function selfManagedTlsSetup(flags: TlsSecretFlags & { "tls-secret": string }, kube: KubeClient, hosts: string[], logger: Logger): SelfManagedTlsSetup {
  const secret = parseSecretName(flags["tls-secret"]);
  const sync = flags["tls-sync-interval"];
  return {
    kube,
    secret,
    webhookConfiguration: flags["webhook-configuration"] ?? DEFAULT_WEBHOOK_CONFIGURATION,
    lease: {
      // Outside a pod (a kubeconfig given), the Lease sits beside the Secret.
      namespace: flags["leader-election-namespace"] ?? podNamespace() ?? secret.namespace,
      name: flags["leader-election-id"] ?? DEFAULT_LEADER_ELECTION_ID,
      identity: defaultCandidateIdentity(),
    },
    hosts,
    ...(flags["tls-timeline"] !== undefined ? { rotation: parseRotationTimeline(flags["tls-timeline"]) } : {}),
    ...(sync !== undefined ? { syncIntervalMs: parseDuration(sync)! } : {}),
    logger,
  };
}

/** Starts self-managed TLS for `serve --tls-secret` and waits for the first certificate. */
export async function selfManagedTlsFromFlags(
  flags: TlsSecretFlags,
  kube: KubeClient | undefined,
  hosts: string[],
  logger: Logger,
  stop?: AbortSignal,
): Promise<RunningSelfManagedTls> {
  const secret = flags["tls-secret"];
  if (secret === undefined) throw new TlsError("missing-secret", "--tls-secret is not given");
  if (kube === undefined) throw new TlsError("needs-kubernetes-api", "--tls-secret needs the Kubernetes API: give --kubeconfig, or run in a pod");
  return startSelfManagedTls({ ...selfManagedTlsSetup({ ...flags, "tls-secret": secret }, kube, hosts, logger), ...(stop ? { stop } : {}) });
}
