// The set-up `check` and `imprimatur test` share: the engine built offline from the policy set `serve` would load
// from the same flags (src/policy/policy-set.ts), a ServerConfig and namespace labels, and every manifest object
// judged by it.
import { loadNamespacesFile } from "../config/namespaces-file.ts";
import { DEFAULT_SERVER_CONFIG, loadServerConfig, type ServerConfig } from "../config/server-config.ts";
import type { RequestUser } from "../core/admission-subject.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import { NO_NAMESPACE_LABELS, type NamespaceLabelSource } from "../core/namespace-labels.ts";
import { unhonouredExceptions } from "../core/policy-exception/apply-exceptions.ts";
import { Engine } from "../engine/engine.ts";
import { buildEngine } from "../engine/engine-builder.ts";
import { loadPolicySet, policySetSource } from "../policy/policy-set.ts";
import { checkObject, type ObjectResult } from "./check-report.ts";
import { readManifests } from "./manifests.ts";
import { withLabels, type NamespaceLabels } from "./namespace-labels-flag.ts";

export interface OfflineSetup {
  /** Policy folders or files; undefined: the embedded default policy, as for `serve`. */
  policies: readonly string[] | undefined;
  /** Shipped profiles bound cluster-wide in front of the policies (--profile). */
  profiles: readonly string[];
  /** Accept a set with no policy (--allow-empty); else loading fails as `serve` fails to start. */
  allowEmpty: boolean;
  /** A ServerConfig file (custom resource kinds, namespacesFile). */
  config: string | undefined;
  /** A namespace-labels file; overrides the config's namespacesFile. */
  namespaces: string | undefined;
  /** Labels given on the command line (--namespace-labels), over those of the file. */
  namespaceLabels?: NamespaceLabels;
  /** The namespace of objects that name none (-n, as kubectl): "default" unless given. */
  namespace?: string;
  /** Who creates the objects (--as, --as-group), for policies' subjects and conditions on request.userInfo. */
  user?: RequestUser;
  /** Pod Security Admission by the namespaces' labels, as serve --pod-security (check --pod-security). */
  podSecurity?: PodSecurityContext;
  /** The namespaces whose PolicyExceptions are honoured, as serve --exceptions-namespace. */
  exceptionNamespaces?: readonly string[];
}

export interface OfflineChecker {
  engine: Engine;
  config: ServerConfig;
  /** The labels the engine decides namespaceSelector bindings with. */
  namespaces: NamespaceLabelSource;
  /** The namespace of objects that name none. */
  namespace: string;
  user?: RequestUser;
  /** The set's PolicyExceptions that are not honoured (their namespace is not an --exceptions-namespace), "ns/name". */
  unhonouredExceptions: string[];
}

/** Throws what loading throws (PolicyLoadError, EmptyPolicySetError, ConfigError, …) for the caller to report. */
export async function offlineChecker(setup: OfflineSetup): Promise<OfflineChecker> {
  const config = setup.config ? await loadServerConfig(setup.config) : structuredClone(DEFAULT_SERVER_CONFIG);
  const { policies } = await loadPolicySet(policySetSource(setup.policies), { profiles: setup.profiles, allowEmpty: setup.allowEmpty });
  const namespacesFile = setup.namespaces ?? config.namespacesFile;
  const fromFile = namespacesFile ? await loadNamespacesFile(namespacesFile) : NO_NAMESPACE_LABELS;
  const namespaces = setup.namespaceLabels && setup.namespaceLabels.size > 0 ? withLabels(fromFile, setup.namespaceLabels) : fromFile;
  return {
    engine: await buildEngine({
      config,
      policies,
      namespaces,
      offline: true,
      ...(setup.podSecurity ? { podSecurity: setup.podSecurity } : {}),
      ...(setup.exceptionNamespaces ? { exceptionNamespaces: setup.exceptionNamespaces } : {}),
    }),
    config,
    namespaces,
    namespace: setup.namespace ?? "default",
    ...(setup.user ? { user: setup.user } : {}),
    unhonouredExceptions: unhonouredExceptions(policies.PolicyException, new Set(setup.exceptionNamespaces)),
  };
}

/** What check and test say of a PolicyException the set holds but that is not honoured, as serve would not honour it. */
export function unhonouredExceptionNote(name: string): string {
  const namespace = name.slice(0, name.indexOf("/"));
  return `PolicyException ${name} is not honoured: exceptions count only in the namespaces --exceptions-namespace names (as for serve), and ${namespace} is not one`;
}

/** Every object of the manifests, judged as `check` judges it; unreadable input goes to `problems`. */
export async function checkManifests(checker: OfflineChecker, targets: readonly string[], strict: boolean, problems: string[]): Promise<ObjectResult[]> {
  const results: ObjectResult[] = [];
  for (const m of await readManifests(targets, problems)) {
    results.push(await checkObject(checker, m, { strict }));
  }
  return results;
}
