// The engine a node judges pulls with: the one pipeline, built online from the policy set the webhook loads, less
// what a pull cannot show. A pull carries an image and the pod's namespace, name and labels, not its spec, so
// PodRestrictions (and Pod Security) stay the webhook's; image policies, trust roots and exceptions apply as they do there.
import type { Logger } from "pino";
import type { AuditLog } from "../audit/audit-log.ts";
import { DEFAULT_SERVER_CONFIG, type ServerConfig } from "../config/server-config.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { PolicySet } from "../core/policy-set/policy-kinds.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { buildEngine } from "../engine/engine-builder.ts";
import type { Engine } from "../engine/engine.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";

/** What of a policy set decides at the node: everything but the kinds that judge a pod's spec. */
export function nodePolicySet(set: PolicySet): PolicySet {
  return { ...set, PodRestriction: [] };
}

export interface NodeEngineOptions {
  policies: PolicySet;
  /** A registry that gives no answer lets the pull through unverified (--failure-policy Ignore). */
  failOpen: boolean;
  registries?: RegistrySettingsMap;
  /** The node's own registry credentials (--authfile), tried after the pull's. */
  staticCredentials?: CredentialLookup;
  /** Namespace labels, for policies with a namespaceSelector (from the API with --kubeconfig); without: such policies cannot decide. */
  namespaces?: NamespaceLabelSource;
  logger: Logger;
  /** The node's audit log: every pull judged, and the overrides (fail-open) the engine records. */
  auditLog?: AuditLog;
  /** The node's cluster, for policies scoped with spec.clusters (as serve --cluster-name); unnamed: those scoped to none. */
  clusterName?: string;
  /** The namespaces whose PolicyExceptions are honoured (as serve --exceptions-namespace); none by default. */
  exceptionNamespaces?: readonly string[];
}

export function nodeServerConfig(failOpen: boolean): ServerConfig {
  return {
    ...DEFAULT_SERVER_CONFIG,
    failOpen,
    // A pull goes to the registry anyway: a tag is resolved afresh for each, so a moved tag is seen at once.
    digests: { ...DEFAULT_SERVER_CONFIG.digests, cacheTtlMs: 0 },
  };
}

export function buildNodeEngine(opts: NodeEngineOptions): Promise<Engine> {
  return buildEngine({
    config: nodeServerConfig(opts.failOpen),
    policies: nodePolicySet(opts.policies),
    logger: opts.logger,
    ...(opts.registries ? { registries: opts.registries } : {}),
    ...(opts.staticCredentials ? { staticCredentials: opts.staticCredentials } : {}),
    ...(opts.namespaces ? { namespaces: opts.namespaces } : {}),
    ...(opts.auditLog ? { auditLog: opts.auditLog } : {}),
    ...(opts.clusterName ? { clusters: { home: opts.clusterName, others: new Map() } } : {}),
    ...(opts.exceptionNamespaces ? { exceptionNamespaces: opts.exceptionNamespaces } : {}),
  });
}
