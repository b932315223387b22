// The registry credentials a pod may use, in the kubelet's order: its own pull secrets, its service account's,
// then the server's own (--authfile). Used for everything the server reads from a registry on a pod's behalf
// (tag→digest pinning, signature lookups), so no pod gets access through another pod's secret.
import type { Logger } from "pino";
import type { CredentialLookup } from "./credential.ts";
import { chainLookups } from "./keyring.ts";
import type { PodPullSecretRefs, PullCredentials } from "../kube/pull-secrets.ts";

export interface PullSecretSource {
  credentialsFor(refs: PodPullSecretRefs, signal?: AbortSignal): Promise<PullCredentials>;
}

export type PodLookup = { lookup: CredentialLookup } | { error: string };

export class PodCredentials {
  private readonly pullSecrets: PullSecretSource | undefined;
  private readonly staticCredentials: CredentialLookup;
  private readonly logger: Logger;

  constructor(opts: { pullSecrets?: PullSecretSource; staticCredentials: CredentialLookup; logger: Logger }) {
    this.pullSecrets = opts.pullSecrets;
    this.staticCredentials = opts.staticCredentials;
    this.logger = opts.logger;
  }

  /** Without refs (an ImageReview names no pod) or API access: the server's own credentials only. */
  async lookupFor(refs: PodPullSecretRefs | undefined, deadline: number): Promise<PodLookup> {
    if (!refs || !this.pullSecrets) return { lookup: chainLookups(this.staticCredentials) };
    try {
      const pod = await this.pullSecrets.credentialsFor(refs, AbortSignal.timeout(Math.max(1, deadline - Date.now())));
      if (pod.problems.length > 0) this.logger.info({ namespace: refs.namespace, problems: pod.problems }, "some pull secrets could not be used");
      return { lookup: chainLookups(pod.lookup, this.staticCredentials) };
    } catch (e) {
      return { error: `the pod's pull secrets could not be read: ${(e as Error).message}` };
    }
  }
}
