// Other clusters' own policy resources (serve --policy-crds with --cluster-kubeconfig NAME=FILE): each cluster's
// ImagePolicies, PodRestrictions, TrustRoots and namespaced policies are loaded as a set of their own, from that
// cluster's API, with their status written there, and handed to the engine for that cluster's requests only
// (src/core/policy-set/cluster-policies.ts). Each cluster reloads on its own: one cluster's broken or slow API neither holds
// nor changes another's policies. Startup waits for every cluster's first list, as it does for the server's own.
import type { Logger } from "pino";
import type { Engine } from "../engine/engine.ts";
import type { Recorder } from "../engine/recorder.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import type { PolicySource } from "../policy/policy-source.ts";
import { serializedPolicyLoader } from "../policy/policy-loader.ts";

/** Another cluster's policy resources could not be loaded at start: the message names the cluster, the cause says why. */
export class ClusterPoliciesError extends ImprimaturError<"load-failed"> {}

export interface RunningClusterPolicies {
  close(): void;
}

/** Loads every cluster's set into `engine` (rejects with ClusterPoliciesError, naming the cluster, when one cannot be read), then keeps each current. */
export async function startClusterPolicies(
  sources: ReadonlyMap<string, PolicySource>,
  opts: { engine: Engine; logger: Logger; recorder: Recorder; watch: boolean },
): Promise<RunningClusterPolicies> {
  const watchers: Array<{ close(): void }> = [];
  const started = [...sources].map(async ([cluster, source]) => {
    const logger = opts.logger.child({ cluster });
    // A cluster's own policies bind no --profile: those are the server's, bound in front of its own set.
    const load = serializedPolicyLoader(source, { profiles: [], logger });
    const reload = async () => {
      try {
        const set = await load();
        opts.engine.setClusterPolicies(cluster, set);
        opts.recorder.policyReload("success");
        logger.info({ policies: set.ImagePolicy.map((p) => p.name), podRestrictions: set.PodRestriction.map((p) => p.name) }, "cluster's policies reloaded");
      } catch (e) {
        opts.recorder.policyReload("failure");
        if (e instanceof PolicyLoadError) logger.error({ errors: e.errors }, "cluster's policy reload failed; keeping its last good policies");
        else logger.error({ err: e }, "cluster's policy reload failed; keeping its last good policies");
      }
    };
    // Watched from before the first load, as the server's own set is (src/server/app.ts): a change meanwhile is
    // reloaded once the first set is in, not lost until the next change.
    let loaded = false;
    let changedMeanwhile = false;
    if (opts.watch) {
      const watcher = source.watch?.(
        () => (loaded ? void reload() : (changedMeanwhile = true)),
        (err) => logger.warn({ err }, "cannot watch the cluster's policy resources"),
      );
      if (watcher) watchers.push(watcher);
    }
    try {
      opts.engine.setClusterPolicies(cluster, await load());
    } catch (e) {
      throw new ClusterPoliciesError("load-failed", `--cluster-kubeconfig ${cluster}: its policy resources (--policy-crds): ${(e as Error).message}`, {
        cause: e,
      });
    }
    loaded = true;
    if (changedMeanwhile) void reload();
  });
  const close = () => {
    for (const w of watchers) w.close();
  };
  const outcomes = await Promise.allSettled(started);
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
  if (failed) {
    close();
    throw failed.reason;
  }
  return { close };
}
