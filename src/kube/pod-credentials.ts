// The registry credentials a pod may use, in the kubelet's order: its own pull secrets, its service account's,
// then the server's own (--authfile). Used for everything the server reads from a registry on a pod's behalf
// (tag→digest pinning, signature lookups), so no pod gets access through another pod's secret.
//
// A namespaced policy is written by the namespace's owners, who choose what it looks up (a rule's signature
// repository, the images it pins): the server's own credentials would answer them about repositories only the
// server may read. Its lookups get the pod's secrets, and the server's only for hosts whose registries-file entry
// says serverCredentialsForNamespacedPolicies.
import type { Logger } from "pino";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { chainLookups } from "../credentials/keyring.ts";
import { CLUSTER_UNREADABLE } from "../core/cluster-scope.ts";
import type { PodPullSecretRefs, PullCredentials } from "./pull-secrets.ts";
import { settingsForHost, type RegistrySettingsMap } from "../registry/registry-settings.ts";

export interface PullSecretSource {
  credentialsFor(refs: PodPullSecretRefs, signal?: AbortSignal): Promise<PullCredentials>;
  /** credentialsFor's answer when every read it needs is at hand; undefined otherwise. */
  credentialsKnown(refs: PodPullSecretRefs): PullCredentials | undefined;
}

export type PodLookup =
  | {
      /** For a cluster policy's lookups: the pod's secrets, then the server's own. */
      lookup: CredentialLookup;
      /** For a namespaced policy's: the pod's secrets, then the server's own where the registries file lends them. */
      namespacedLookup: CredentialLookup;
    }
  /**
   * The pull secrets could not be read. code: cluster-unreadable for a cluster the server cannot read (denied
   * whatever the failure policy); any other failure (forbidden, timed out, given up at the deadline) is an outage of
   * the API, never the registry's answer: unavailable, and the failure policy decides.
   */
  | { error: string; code: typeof CLUSTER_UNREADABLE | "unavailable" };

/** The lookup for what `policy` asks: a namespaced policy (one with a namespace) gets namespacedLookup. */
export function lookupForPolicy(creds: Extract<PodLookup, { lookup: CredentialLookup }>, policy: { namespace?: string | undefined }): CredentialLookup {
  return policy.namespace === undefined ? creds.lookup : creds.namespacedLookup;
}

export class PodCredentials {
  private readonly pullSecrets: PullSecretSource | undefined;
  private readonly staticCredentials: CredentialLookup;
  /** The server's credentials for hosts that lend them to namespaced policies. */
  private readonly lentCredentials: CredentialLookup;
  private readonly logger: Logger;
  /** The server's own credentials as a pod without pull secrets gets them: one lookup, so its identity is hashed once. */
  private readonly ownOnly: PodLookup;
  /** Each pod's credentials chained with the server's once, so the same credentials give the same lookups. */
  private readonly chained = new WeakMap<PullCredentials, PodLookup>();

  constructor(opts: { pullSecrets?: PullSecretSource; staticCredentials: CredentialLookup; registries?: RegistrySettingsMap; logger: Logger }) {
    this.pullSecrets = opts.pullSecrets;
    this.staticCredentials = opts.staticCredentials;
    const registries = opts.registries ?? new Map();
    this.lentCredentials = (host, repository) =>
      settingsForHost(registries, host)?.serverCredentialsForNamespacedPolicies === true ? opts.staticCredentials(host, repository) : [];
    this.logger = opts.logger;
    this.ownOnly = { lookup: chainLookups(this.staticCredentials), namespacedLookup: chainLookups(this.lentCredentials) };
  }

  /** Credentials the caller presented (a node's pull), then the server's own (for namespaced policies, only where lent). */
  lookupPresented(presented: CredentialLookup): PodLookup {
    return { lookup: chainLookups(presented, this.staticCredentials), namespacedLookup: chainLookups(presented, this.lentCredentials) };
  }

  /** Without refs (an ImageReview names no pod) or API access: the server's own credentials only (for namespaced policies, only where lent). */
  async lookupFor(refs: PodPullSecretRefs | undefined, deadline: number): Promise<PodLookup> {
    if (!refs || !this.pullSecrets) return this.ownOnly;
    try {
      return this.podLookup(refs, await this.pullSecrets.credentialsFor(refs, AbortSignal.timeout(Math.max(1, deadline - Date.now()))));
    } catch (e) {
      const code = e instanceof ImprimaturError && e.code === CLUSTER_UNREADABLE ? CLUSTER_UNREADABLE : "unavailable";
      return { error: `the pod's pull secrets could not be read: ${(e as Error).message}`, code };
    }
  }

  /**
   * lookupFor's answer when the pod's pull secrets are at hand (read within their TTL), without a timer or an await;
   * undefined when they are not (the caller then takes lookupFor, which reads them).
   */
  lookupKnown(refs: PodPullSecretRefs | undefined): PodLookup | undefined {
    if (!refs || !this.pullSecrets) return this.ownOnly;
    const pod = this.pullSecrets.credentialsKnown(refs);
    return pod && this.podLookup(refs, pod);
  }

  private podLookup(refs: PodPullSecretRefs, pod: PullCredentials): PodLookup {
    if (pod.problems.length > 0) this.logger.info({ namespace: refs.namespace, problems: pod.problems }, "some pull secrets could not be used");
    let chained = this.chained.get(pod);
    if (!chained)
      this.chained.set(
        pod,
        (chained = { lookup: chainLookups(pod.lookup, this.staticCredentials), namespacedLookup: chainLookups(pod.lookup, this.lentCredentials) }),
      );
    return chained;
  }
}
