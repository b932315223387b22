// `serve --cluster-name NAME` and `--cluster-kubeconfig NAME=FILE`: which cluster serve's own kubeconfig reaches,
// and the kubeconfigs of the other clusters whose apiservers call the server. Flags rather than a section of the
// CallerTokens file: certificate callers have no entry there, and a kubeconfig names a file, as --kubeconfig does.
// Each other cluster's namespace labels are listed and watched from the start, as the server's own cluster's are.
import type { Logger } from "pino";
import type { ClusterConnection, ClusterConnections } from "../engine/cluster-reads.ts";
import { loadKubeClient } from "../kube/kube-connection.ts";
import { NamespaceLabelCache } from "../kube/namespace-label-cache.ts";
import { CALLER_NAME } from "../caller-auth/caller-tokens.ts";

export interface ClusterFlags {
  "cluster-name"?: string | undefined;
  "cluster-kubeconfig"?: string[] | undefined;
}

/** The flags read: the server's own cluster's name and the other clusters' kubeconfig files, or the problem. */
export function clusterKubeconfigs(flags: ClusterFlags): { home: string | undefined; files: ReadonlyMap<string, string> } | { problem: string } {
  const home = flags["cluster-name"];
  if (home !== undefined && !CALLER_NAME.test(home))
    return { problem: `--cluster-name: ${JSON.stringify(home)} is not a cluster name (letters, digits, '-', '_', '.')` };
  const files = new Map<string, string>();
  for (const value of flags["cluster-kubeconfig"] ?? []) {
    const at = value.indexOf("=");
    const [name, file] = at < 0 ? [value, ""] : [value.slice(0, at), value.slice(at + 1)];
    if (!CALLER_NAME.test(name) || file === "") return { problem: `--cluster-kubeconfig: ${JSON.stringify(value)} is not NAME=FILE` };
    if (name === home) return { problem: `--cluster-kubeconfig ${name}: that is the server's own cluster (--cluster-name), read through --kubeconfig` };
    if (files.has(name)) return { problem: `--cluster-kubeconfig ${name}: given twice` };
    files.set(name, file);
  }
  return { home, files };
}

/**
 * The clusters token callers speak for that serve has no way to read: neither its own (--cluster-name) nor one
 * of --cluster-kubeconfig. A review from such a caller that needs its cluster (namespace labels, pull secrets,
 * break-glass's SubjectAccessReview) is refused; said at start, and at each reread of the file, so that a
 * misspelt `cluster` is not first met as a refused pod. (Certificate callers name their cluster in their
 * certificate, which serve sees only when they call.)
 */
export function unreadableCallerClusters(tokens: Iterable<{ cluster: string }>, home: string | undefined, others: ReadonlyMap<string, unknown>): string[] {
  const unknown = new Set<string>();
  for (const { cluster } of tokens) if (cluster !== home && !others.has(cluster)) unknown.add(cluster);
  return [...unknown].sort();
}

export interface ConnectedClusters {
  connections: ClusterConnections;
  close(): Promise<void>;
}

/** Loads each other cluster's kubeconfig and lists its namespaces; a cluster that cannot be read stops serve, naming it. */
export async function connectClusters(home: string | undefined, files: ReadonlyMap<string, string>, logger: Logger): Promise<ConnectedClusters> {
  const caches = new Map<string, NamespaceLabelCache>();
  const close = async () => void (await Promise.all([...caches.values()].map((c) => c.close())));
  const others = new Map<string, ClusterConnection>();
  const named = (name: string, e: unknown) => new Error(`--cluster-kubeconfig ${name}: ${(e as Error).message}`, { cause: e });
  try {
    for (const [name, file] of files) {
      let kube;
      try {
        kube = loadKubeClient(file);
      } catch (e) {
        throw named(name, e);
      }
      const namespaces = new NamespaceLabelCache(kube, { logger: logger.child({ cluster: name }) });
      caches.set(name, namespaces);
      others.set(name, { kube, namespaces });
    }
    await Promise.all(
      [...caches].map(([name, cache]) =>
        cache.start().catch((e: unknown) => {
          throw named(name, e);
        }),
      ),
    );
  } catch (e) {
    await close();
    throw e;
  }
  return { connections: { ...(home === undefined ? {} : { home }), others }, close };
}
