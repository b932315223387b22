// A pod's registry credentials from the Kubernetes API: the pull secrets it names, then those of its service
// account, read with GETs that are cached briefly and shared between concurrent callers (a rollout admits many
// pods of one namespace at once).
//
// What counts follows the kubelet: only secrets of type kubernetes.io/dockerconfigjson (".dockerconfigjson")
// and kubernetes.io/dockercfg (".dockercfg") hold pull credentials; a missing secret is skipped. Such things
// are returned as problems. A failed API call (unreachable, 401, 403) is thrown instead: the caller decides
// whether to fail open or closed.
//
// Pod first, then service account, as two keyrings chained: the kubelet sees only the pod's imagePullSecrets,
// which the ServiceAccount admission plugin fills from the service account when the pod names none; so the
// credentials the node will use always come first, and the service account's follow as a fallback.
//
// Secret data never reaches a log or a message: only namespace/name, types and registry keys do.
import { describeApiError, hasStatus, KubeApiError } from "./api-requests.ts";
import type { KubeClient } from "./kube-client.ts";
import type { Logger } from "pino";
import { InFlight } from "../registry/in-flight.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { parseDockerConfig } from "../credentials/docker-config.ts";
import type { DockerConfigEntry, DockerConfigFormat } from "../credentials/docker-config.ts";
import { chainLookups, CredentialKeyring } from "../credentials/keyring.ts";

export interface PodPullSecretRefs {
  namespace: string;
  imagePullSecrets?: Array<{ name?: string }>;
  serviceAccountName?: string;
}

export interface PullCredentials {
  lookup: CredentialLookup;
  /** "secret ns/name" for each secret that contributed credentials, pod's first. */
  sources: string[];
  /** Missing secret or service account, wrong type, unparsable entries: names only, never values. */
  problems: string[];
}

export interface PullSecretReaderOptions {
  /** How long a secret or service account read (found or not) is reused. Default 10 s. */
  ttlMs?: number;
  /** Each GET is abandoned after this long. Default 10 s. */
  requestTimeoutMs?: number;
  logger?: Logger;
  /** The clock for the cache; Date.now by default. */
  now?: () => number;
}

/** A secret as far as pulling is concerned. */
interface SecretRead {
  entries: DockerConfigEntry[];
  problems: string[];
}

/** A Secret as far as pulling goes. */
interface SecretObject {
  type?: string;
  data?: Record<string, string>;
}

interface ServiceAccountObject {
  imagePullSecrets?: Array<{ name?: string }>;
}

interface ServiceAccountRead {
  found: boolean;
  pullSecretNames: string[];
}

const PULL_SECRET_TYPES: ReadonlyMap<string, { dataKey: string; format: DockerConfigFormat }> = new Map([
  ["kubernetes.io/dockerconfigjson", { dataKey: ".dockerconfigjson", format: "dockerconfigjson" as const }],
  ["kubernetes.io/dockercfg", { dataKey: ".dockercfg", format: "dockercfg" as const }],
]);
const DEFAULT_SERVICE_ACCOUNT = "default";

export class PullSecretReader {
  /** GETs sent to the API (cache misses not joined to a read in flight); for tests and metrics. */
  apiReads = 0;

  private readonly kube: KubeClient;
  private readonly server: string;
  private readonly requestTimeoutMs: number;
  private readonly log: Logger | undefined;
  // Reads (found or not) are kept for the TTL and shared while pending; failures are not kept.
  private readonly secrets: InFlight<SecretRead>;
  private readonly serviceAccounts: InFlight<ServiceAccountRead>;
  /** The last credentials assembled per pod's references, with the reads they came from. */
  private readonly assembledByRefs = new Map<string, { reads: readonly object[]; credentials: PullCredentials }>();

  constructor(kubeConfig: KubeClient, opts: PullSecretReaderOptions = {}) {
    this.kube = kubeConfig;
    this.server = kubeConfig.connection.server;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.log = opts.logger;
    const cache = { ttlMs: opts.ttlMs ?? 10_000, now: opts.now };
    this.secrets = new InFlight(cache);
    this.serviceAccounts = new InFlight(cache);
  }

  /**
   * The pod's imagePullSecrets, then its service account's (default "default"), as one lookup. `podOnly`: the
   * pod's own, as the kubelet reads them (a created pod already carries its service account's; a node's identity
   * may not read service accounts).
   */
  async credentialsFor(refs: PodPullSecretRefs, signal?: AbortSignal, opts: { podOnly?: boolean } = {}): Promise<PullCredentials> {
    const wanted = wantedReads(refs, opts);
    const { namespace } = wanted;
    const [podSecrets, serviceAccount] = await Promise.all([
      Promise.all(wanted.podSecretNames.map((name) => this.readSecret(namespace, name, signal))),
      opts.podOnly ? POD_ONLY : this.readServiceAccount(namespace, wanted.serviceAccountName, signal),
    ]);
    const accountSecretNames = accountSecretsOf(wanted, serviceAccount);
    const accountSecrets = await Promise.all(accountSecretNames.map((name) => this.readSecret(namespace, name, signal)));
    return this.assembled(wanted, { serviceAccount, podSecrets, accountSecretNames, accountSecrets });
  }

  /**
   * What credentialsFor would answer, when every read it needs is kept (read within the TTL): no GET, no await.
   * Undefined when any is not (never read, expired, or in flight): the caller then takes credentialsFor.
   */
  credentialsKnown(refs: PodPullSecretRefs, opts: { podOnly?: boolean } = {}): PullCredentials | undefined {
    const wanted = wantedReads(refs, opts);
    const { namespace } = wanted;
    const serviceAccount = opts.podOnly ? POD_ONLY : this.serviceAccounts.peek(serviceAccountKey(namespace, wanted.serviceAccountName));
    if (!serviceAccount) return undefined;
    const podSecrets = keptAll(this.secrets, namespace, wanted.podSecretNames);
    const accountSecretNames = accountSecretsOf(wanted, serviceAccount);
    const accountSecrets = keptAll(this.secrets, namespace, accountSecretNames);
    if (!podSecrets || !accountSecrets) return undefined;
    return this.assembled(wanted, { serviceAccount, podSecrets, accountSecretNames, accountSecrets });
  }

  /**
   * The credentials of these reads. The same reads (the same kept objects) give the same answer object, so its
   * lookup is one function for as long as they are kept: what is derived from a lookup (the verifier's credential
   * identity, src/credentials/credential-identity.ts) is then worked out once, not on every admission.
   */
  private assembled(wanted: WantedReads, read: PodReads): PullCredentials {
    const reads: readonly object[] = [read.serviceAccount, ...read.podSecrets, ...read.accountSecrets];
    const kept = this.assembledByRefs.get(wanted.key);
    if (kept && kept.reads.length === reads.length && kept.reads.every((r, i) => r === reads[i])) return kept.credentials;
    const credentials = assemble(wanted, read);
    if (this.assembledByRefs.size >= MAX_ASSEMBLED) this.assembledByRefs.clear();
    this.assembledByRefs.set(wanted.key, { reads, credentials });
    return credentials;
  }

  // -------------------------------------------------------------------------------------------

  private readSecret(namespace: string, name: string, signal: AbortSignal | undefined): Promise<SecretRead> {
    return this.cached(this.secrets, secretKey(namespace, name), signal, async (requestSignal) => {
      let secret: SecretObject | undefined;
      try {
        secret = (await this.kube.read(`${namespacePath(namespace)}/secrets/${encodeURIComponent(name)}`, { signal: requestSignal })) as
          SecretObject | undefined;
      } catch (err) {
        throw this.apiError(`secret ${namespace}/${name}`, `"get" on secrets in namespace ${namespace}`, err, requestSignal);
      }
      if (secret === undefined) return { entries: [], problems: [`${secretSource(namespace, name)} not found`] };
      return pullSecretContents(namespace, name, secret);
    });
  }

  private readServiceAccount(namespace: string, name: string, signal: AbortSignal | undefined): Promise<ServiceAccountRead> {
    return this.cached(this.serviceAccounts, serviceAccountKey(namespace, name), signal, async (requestSignal) => {
      let account: ServiceAccountObject | undefined;
      try {
        account = (await this.kube.read(`${namespacePath(namespace)}/serviceaccounts/${encodeURIComponent(name)}`, { signal: requestSignal })) as
          ServiceAccountObject | undefined;
      } catch (err) {
        throw this.apiError(`service account ${namespace}/${name}`, `"get" on serviceaccounts in namespace ${namespace}`, err, requestSignal);
      }
      if (account === undefined) return { found: false, pullSecretNames: [] };
      return { found: true, pullSecretNames: unique((account.imagePullSecrets ?? []).map((ref) => ref.name ?? "")) };
    });
  }

  /**
   * The kept result for `key`, or a new read shared by every caller until it settles. A caller's signal ends
   * only its own wait: the read goes on for the others, bounded by the request timeout.
   */
  private cached<T>(reads: InFlight<T>, key: string, signal: AbortSignal | undefined, read: (requestSignal: AbortSignal) => Promise<T>): Promise<T> {
    const start = (): Promise<T> => {
      this.apiReads++;
      this.log?.debug({ object: key }, "pull secrets: reading from the Kubernetes API");
      return read(AbortSignal.timeout(this.requestTimeoutMs));
    };
    return reads.run(key, start, signal, () => abortError(signal!, key));
  }

  private apiError(what: string, permission: string, err: unknown, requestSignal: AbortSignal): KubeApiError {
    const prefix = `cannot read ${what} from the Kubernetes API at ${this.server}`;
    if (requestSignal.aborted) return new KubeApiError("timeout", `${prefix}: no answer within ${this.requestTimeoutMs / 1000} s`, { cause: err });
    if (hasStatus(err, 403)) {
      return new KubeApiError("forbidden", `${prefix}: ${describeApiError(err)}; the identity Imprimatur uses needs RBAC permission ${permission}`, {
        cause: err,
      });
    }
    if (hasStatus(err, 401)) {
      return new KubeApiError(
        "unauthorized",
        `${prefix}: ${describeApiError(err)}; the API rejected the credentials (check the kubeconfig or the service account token)`,
        { cause: err },
      );
    }
    return new KubeApiError("unavailable", `${prefix}: ${describeApiError(err)}`, { cause: err });
  }
}

/** What a pod's references ask to read. */
interface WantedReads {
  namespace: string;
  /** Non-empty, first occurrence kept. */
  podSecretNames: string[];
  serviceAccountName: string;
  /** All of the above (and podOnly) as one string. */
  key: string;
}

/** A pod-only read needs no service account: the pod already carries its service account's secrets. */
const POD_ONLY: ServiceAccountRead = { found: true, pullSecretNames: [] };
/** Pods' credentials remembered with their reads; past this many, forgotten (and assembled again) all at once. */
const MAX_ASSEMBLED = 1_000;

function wantedReads(refs: PodPullSecretRefs, opts: { podOnly?: boolean }): WantedReads {
  const podSecretNames = unique((refs.imagePullSecrets ?? []).map((ref) => ref.name ?? ""));
  const serviceAccountName = refs.serviceAccountName || DEFAULT_SERVICE_ACCOUNT;
  const key = JSON.stringify([refs.namespace, opts.podOnly === true ? "" : serviceAccountName, podSecretNames]);
  return { namespace: refs.namespace, podSecretNames, serviceAccountName, key };
}

/** The service account's secrets, without those the pod names itself (a secret named by both is the pod's: read once, used once). */
function accountSecretsOf(wanted: WantedReads, serviceAccount: ServiceAccountRead): string[] {
  return serviceAccount.pullSecretNames.filter((name) => !wanted.podSecretNames.includes(name));
}

/** Every one of the named secrets' kept reads, or undefined when any is not kept. */
function keptAll(secrets: InFlight<SecretRead>, namespace: string, names: readonly string[]): SecretRead[] | undefined {
  const reads: SecretRead[] = [];
  for (const name of names) {
    const read = secrets.peek(secretKey(namespace, name));
    if (!read) return undefined;
    reads.push(read);
  }
  return reads;
}

/** What was read for a pod: its service account, its own secrets, and the account's secrets it does not name itself. */
interface PodReads {
  serviceAccount: ServiceAccountRead;
  podSecrets: readonly SecretRead[];
  accountSecretNames: readonly string[];
  accountSecrets: readonly SecretRead[];
}

/** The pod's secrets' keyring chained before its service account's, with where they came from and what was wrong. */
function assemble(wanted: WantedReads, { serviceAccount, podSecrets, accountSecretNames, accountSecrets }: PodReads): PullCredentials {
  const { namespace } = wanted;
  const problems: string[] = [];
  if (!serviceAccount.found) problems.push(`service account ${namespace}/${wanted.serviceAccountName} not found`);
  const sources: string[] = [];
  const keyringOf = (names: readonly string[], reads: readonly SecretRead[]): CredentialKeyring => {
    const entries: DockerConfigEntry[] = [];
    reads.forEach((read, i) => {
      problems.push(...read.problems);
      if (read.entries.length > 0) sources.push(secretSource(namespace, names[i]!));
      entries.push(...read.entries);
    });
    const keyring = CredentialKeyring.of(entries);
    for (const ignored of keyring.ignoredKeys) problems.push(`${ignored}: not a registry location; ignored`);
    return keyring;
  };
  const podKeyring = keyringOf(wanted.podSecretNames, podSecrets);
  const accountKeyring = keyringOf(accountSecretNames, accountSecrets);
  return { lookup: chainLookups(podKeyring.lookup, accountKeyring.lookup), sources, problems };
}

function secretKey(namespace: string, name: string): string {
  return `secret ${namespace}/${name}`;
}

function serviceAccountKey(namespace: string, name: string): string {
  return `service account ${namespace}/${name}`;
}

/** The pull credentials a secret holds; anything that keeps it from being a pull secret is a problem. */
function pullSecretContents(namespace: string, name: string, secret: SecretObject): SecretRead {
  const source = secretSource(namespace, name);
  const type = secret.type || "Opaque";
  const kind = PULL_SECRET_TYPES.get(type);
  if (kind === undefined) return { entries: [], problems: [`${source} has type ${type}, not a pull secret`] };
  const encoded = secret.data?.[kind.dataKey];
  if (!encoded) return { entries: [], problems: [`${source} (${type}) has no ${kind.dataKey} data`] };
  try {
    return parseDockerConfig(Buffer.from(encoded, "base64").toString("utf8"), kind.format, source);
  } catch (err) {
    return { entries: [], problems: [(err as Error).message] };
  }
}

function namespacePath(namespace: string): string {
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}`;
}

function secretSource(namespace: string, name: string): string {
  return `secret ${namespace}/${name}`;
}

/** Non-empty names, first occurrence kept (the kubelet skips references without a name). */
function unique(names: string[]): string[] {
  return [...new Set(names.filter((name) => name !== ""))];
}

function abortError(signal: AbortSignal, what: string): KubeApiError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new KubeApiError("aborted", `gave up waiting for ${what} from the Kubernetes API: ${reason}`);
}
