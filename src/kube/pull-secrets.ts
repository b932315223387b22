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
import { CoreV1Api } from "@kubernetes/client-node";
import type { KubeConfig, V1Secret } from "@kubernetes/client-node";
import { describeApiError, hasStatus, withSignal } from "./api-requests.ts";
import type { Logger } from "pino";
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

interface ServiceAccountRead {
  found: boolean;
  pullSecretNames: string[];
}

const PULL_SECRET_TYPES: ReadonlyMap<string, { dataKey: string; format: DockerConfigFormat }> = new Map([
  ["kubernetes.io/dockerconfigjson", { dataKey: ".dockerconfigjson", format: "dockerconfigjson" as const }],
  ["kubernetes.io/dockercfg", { dataKey: ".dockercfg", format: "dockercfg" as const }],
]);
const DEFAULT_SERVICE_ACCOUNT = "default";
// Expired entries are swept only once the cache is this big.
const SWEEP_THRESHOLD = 1_000;

export class PullSecretReader {
  /** GETs sent to the API (cache misses not joined to a read in flight); for tests and metrics. */
  apiReads = 0;

  private readonly api: CoreV1Api;
  private readonly server: string;
  private readonly ttlMs: number;
  private readonly requestTimeoutMs: number;
  private readonly log: Logger | undefined;
  private readonly now: () => number;
  private readonly cache = new Map<string, { value: Promise<unknown>; expiresAt: number | undefined }>();

  constructor(kubeConfig: KubeConfig, opts: PullSecretReaderOptions = {}) {
    this.api = kubeConfig.makeApiClient(CoreV1Api);
    this.server = kubeConfig.getCurrentCluster()?.server ?? "(no current cluster)";
    this.ttlMs = opts.ttlMs ?? 10_000;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.log = opts.logger;
    this.now = opts.now ?? Date.now;
  }

  /** The pod's imagePullSecrets, then its service account's (default "default"), as one lookup. */
  async credentialsFor(refs: PodPullSecretRefs, signal?: AbortSignal): Promise<PullCredentials> {
    const namespace = refs.namespace;
    const podSecretNames = unique((refs.imagePullSecrets ?? []).map((ref) => ref.name ?? ""));
    const serviceAccountName = refs.serviceAccountName || DEFAULT_SERVICE_ACCOUNT;

    const [podSecrets, serviceAccount] = await Promise.all([
      Promise.all(podSecretNames.map((name) => this.readSecret(namespace, name, signal))),
      this.readServiceAccount(namespace, serviceAccountName, signal),
    ]);
    // A secret named by both is the pod's: read once, used once.
    const accountSecretNames = serviceAccount.pullSecretNames.filter((name) => !podSecretNames.includes(name));
    const accountSecrets = await Promise.all(accountSecretNames.map((name) => this.readSecret(namespace, name, signal)));

    const problems: string[] = [];
    if (!serviceAccount.found) problems.push(`service account ${namespace}/${serviceAccountName} not found`);
    const sources: string[] = [];
    const keyringOf = (names: string[], reads: SecretRead[]): CredentialKeyring => {
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
    const podKeyring = keyringOf(podSecretNames, podSecrets);
    const accountKeyring = keyringOf(accountSecretNames, accountSecrets);
    return { lookup: chainLookups(podKeyring.lookup, accountKeyring.lookup), sources, problems };
  }

  // -------------------------------------------------------------------------------------------

  private readSecret(namespace: string, name: string, signal: AbortSignal | undefined): Promise<SecretRead> {
    return this.cached(`secret ${namespace}/${name}`, signal, async (requestSignal) => {
      let secret: V1Secret;
      try {
        secret = await this.api.readNamespacedSecret({ namespace, name }, withSignal(requestSignal));
      } catch (err) {
        if (hasStatus(err, 404)) return { entries: [], problems: [`${secretSource(namespace, name)} not found`] };
        throw this.apiError(`secret ${namespace}/${name}`, `"get" on secrets in namespace ${namespace}`, err, requestSignal);
      }
      return pullSecretContents(namespace, name, secret);
    });
  }

  private readServiceAccount(namespace: string, name: string, signal: AbortSignal | undefined): Promise<ServiceAccountRead> {
    return this.cached(`service account ${namespace}/${name}`, signal, async (requestSignal) => {
      try {
        const account = await this.api.readNamespacedServiceAccount({ namespace, name }, withSignal(requestSignal));
        return { found: true, pullSecretNames: unique((account.imagePullSecrets ?? []).map((ref) => ref.name ?? "")) };
      } catch (err) {
        if (hasStatus(err, 404)) return { found: false, pullSecretNames: [] };
        throw this.apiError(`service account ${namespace}/${name}`, `"get" on serviceaccounts in namespace ${namespace}`, err, requestSignal);
      }
    });
  }

  /**
   * The cached value for `key`, or a new read shared by every caller until it settles. Results (found or not)
   * are kept for the TTL; failures are not kept. A caller's signal ends only its own wait: the read goes on
   * for the others, bounded by the request timeout.
   */
  private cached<T>(key: string, signal: AbortSignal | undefined, read: (requestSignal: AbortSignal) => Promise<T>): Promise<T> {
    const now = this.now();
    let entry = this.cache.get(key);
    if (entry !== undefined && entry.expiresAt !== undefined && entry.expiresAt <= now) {
      this.cache.delete(key);
      entry = undefined;
    }
    if (entry === undefined) {
      if (this.cache.size >= SWEEP_THRESHOLD) this.sweep(now);
      this.apiReads++;
      this.log?.debug({ object: key }, "pull secrets: reading from the Kubernetes API");
      const requestSignal = AbortSignal.timeout(this.requestTimeoutMs);
      const created: { value: Promise<unknown>; expiresAt: number | undefined } = { value: Promise.resolve(), expiresAt: undefined };
      created.value = read(requestSignal).then(
        (value) => {
          created.expiresAt = this.now() + this.ttlMs;
          return value;
        },
        (err: unknown) => {
          if (this.cache.get(key) === created) this.cache.delete(key);
          throw err;
        },
      );
      // Callers that gave up no longer listen; the rejection must not go unhandled.
      created.value.catch(() => {});
      this.cache.set(key, created);
      entry = created;
    }
    return untilAborted(entry.value as Promise<T>, signal, key);
  }

  private sweep(now: number): void {
    for (const [key, entry] of this.cache) if (entry.expiresAt !== undefined && entry.expiresAt <= now) this.cache.delete(key);
  }

  private apiError(what: string, permission: string, err: unknown, requestSignal: AbortSignal): Error {
    const prefix = `cannot read ${what} from the Kubernetes API at ${this.server}`;
    if (requestSignal.aborted) return new Error(`${prefix}: no answer within ${this.requestTimeoutMs / 1000} s`);
    if (hasStatus(err, 403)) {
      return new Error(`${prefix}: ${describeApiError(err)}; the identity Imprimatur uses needs RBAC permission ${permission}`);
    }
    if (hasStatus(err, 401)) {
      return new Error(`${prefix}: ${describeApiError(err)}; the API rejected the credentials (check the kubeconfig or the service account token)`);
    }
    return new Error(`${prefix}: ${describeApiError(err)}`);
  }
}

/** The pull credentials a secret holds; anything that keeps it from being a pull secret is a problem. */
function pullSecretContents(namespace: string, name: string, secret: V1Secret): SecretRead {
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

function secretSource(namespace: string, name: string): string {
  return `secret ${namespace}/${name}`;
}

/** Non-empty names, first occurrence kept (the kubelet skips references without a name). */
function unique(names: string[]): string[] {
  return [...new Set(names.filter((name) => name !== ""))];
}

/** `promise`, or a rejection as soon as `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, what: string): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(abortError(signal, what));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal, what));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

function abortError(signal: AbortSignal, what: string): Error {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new Error(`gave up waiting for ${what} from the Kubernetes API: ${reason}`);
}

