// The set-up `check` and `imprimatur test` share: the engine built offline from policy paths, shipped profiles,
// a ServerConfig and namespace labels, and every manifest object judged by it.
import { loadNamespacesFile } from "../config/namespaces-file.ts";
import { DEFAULT_SERVER_CONFIG, loadServerConfig, type ServerConfig } from "../config/server-config.ts";
import { NO_NAMESPACE_LABELS } from "../core/namespace-labels.ts";
import { Engine } from "../engine/engine.ts";
import { loadPoliciesWithProfiles } from "../policy/load-policies.ts";
import { policyFolders } from "../policy/policy-source.ts";
import { EMBEDDED_POLICIES } from "./args.ts";
import { checkObject, type ObjectResult } from "./check-report.ts";
import { readManifests } from "./manifests.ts";

export interface OfflineSetup {
  /** Policy folders or files; undefined: the embedded default, or nothing but the profiles when some are given. */
  policies: readonly string[] | undefined;
  profiles: readonly string[];
  /** A ServerConfig file (custom resource kinds, namespacesFile). */
  config: string | undefined;
  /** A namespace-labels file; overrides the config's namespacesFile. */
  namespaces: string | undefined;
}

export interface OfflineChecker {
  engine: Engine;
  config: ServerConfig;
}

/** Throws what loading throws (PolicyLoadError, ConfigError, …) for the caller to report. */
export async function offlineChecker(setup: OfflineSetup): Promise<OfflineChecker> {
  const config = setup.config ? await loadServerConfig(setup.config) : structuredClone(DEFAULT_SERVER_CONFIG);
  const paths = setup.policies ?? (setup.profiles.length > 0 ? [] : [EMBEDDED_POLICIES]);
  const { policies } = await loadPoliciesWithProfiles(policyFolders(paths), setup.profiles);
  const namespacesFile = setup.namespaces ?? config.namespacesFile;
  const namespaces = namespacesFile ? await loadNamespacesFile(namespacesFile) : NO_NAMESPACE_LABELS;
  return { engine: await Engine.build({ config, policies, namespaces, offline: true }), config };
}

/** Every object of the manifests, judged as `check` judges it; unreadable input goes to `problems`. */
export async function checkManifests(checker: OfflineChecker, targets: readonly string[], strict: boolean, problems: string[]): Promise<ObjectResult[]> {
  const results: ObjectResult[] = [];
  for (const m of await readManifests(targets, problems)) {
    results.push(await checkObject(checker.engine, m, { strict }));
  }
  return results;
}
