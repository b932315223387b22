// The policy custom resources (ImagePolicy, PodRestriction, TrustRoot in imprimatur.dev/v1alpha1, and the
// namespaced kinds across every namespace) kept current from the Kubernetes API: each kind is listed, then
// watched from the list's resource version;
// a watch that ends is resumed from the last version seen (bookmarks keep it fresh), and one the server
// refuses with 410 Gone starts over with a list. Every failure is logged and retried with a backoff, as
// the namespace label cache does: both are kept by the one ListWatch (src/kube/list-watch-loop.ts).
import type { Logger } from "pino";
import { ListWatch, type ListPage } from "../kube/list-watch-loop.ts";
import { describeApiError, hasStatus, KubeApiError, kubeApiErrorCode } from "../kube/api-requests.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import { POLICY_GROUP, POLICY_RESOURCE_KINDS, POLICY_VERSION, type PolicyResourceKind } from "./policy-crds.ts";
import { contentKey, policyResourceOf, resourceKey, type PolicyResourceObject } from "./resource-documents.ts";
import { ResourcePolicySource, type PolicyResourceStore } from "./resource-policy-source.ts";
import type { PolicySource } from "../policy/policy-source.ts";
import { PolicyStatusWriter } from "./status-writer.ts";

export interface PolicyResourceWatchOptions {
  logger: Logger;
  /** How long synced() waits for the first list of every kind. Default 10 s. */
  startTimeoutMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

const LIST_PAGE_SIZE = 500;
const LIST_TIMEOUT_MS = 30_000;

/** One kind's table, kept current by its own list and watch. */
class KindWatch {
  /** By name, or "namespace/name" for a namespaced kind (resourceKey). */
  readonly table = new Map<string, PolicyResourceObject>();
  listed = false;
  lastError: unknown;
  readonly kind: PolicyResourceKind;
  private readonly owner: PolicyResourceWatch;
  private readonly listWatch: ListWatch;

  constructor(kind: PolicyResourceKind, owner: PolicyResourceWatch) {
    this.kind = kind;
    this.owner = owner;
    this.listWatch = new ListWatch(
      owner.kube,
      {
        what: "policy resources",
        logFields: { kind: kind.kind },
        log: owner.log,
        minBackoffMs: owner.minBackoffMs,
        maxBackoffMs: owner.maxBackoffMs,
        path: `/apis/${POLICY_GROUP}/${POLICY_VERSION}/${kind.plural}`,
        listPage: (continueToken) => this.listPage(continueToken),
      },
      {
        replaceAll: (items) => this.replaceAll(items),
        apply: (type, object) => this.apply(type, object),
        listed: () => {
          if (this.listed) return;
          this.listed = true;
          owner.log.info({ kind: kind.kind, count: this.table.size }, "policy resources: initial list complete");
          owner.kindListed();
        },
        failed: (err) => (this.lastError = err),
      },
    );
  }

  start(): void {
    this.listWatch.start();
  }

  stop(): Promise<void> {
    return this.listWatch.close();
  }

  private async listPage(continueToken: string | undefined): Promise<ListPage> {
    const page = (await this.owner.withTimeout(LIST_TIMEOUT_MS, (signal) =>
      this.owner.kube.request("GET", `/apis/${POLICY_GROUP}/${POLICY_VERSION}/${this.kind.plural}`, {
        query: { limit: LIST_PAGE_SIZE, continue: continueToken || undefined },
        signal,
      }),
    )) as { items?: unknown[]; metadata?: { resourceVersion?: string; continue?: string } } | undefined;
    return { items: page?.items ?? [], resourceVersion: page?.metadata?.resourceVersion ?? "", continueToken: page?.metadata?.continue || undefined };
  }

  /** After a full list: the table is every object listed; a reload only when some content changed. */
  private replaceAll(items: readonly unknown[]): void {
    const before = new Map([...this.table].map(([key, r]) => [key, contentKey(r)]));
    this.table.clear();
    for (const item of items) {
      const r = policyResourceOf(this.kind.kind, item);
      if (r) this.table.set(resourceKey(r), r);
    }
    const after = new Map([...this.table].map(([key, r]) => [key, contentKey(r)]));
    if (before.size !== after.size || [...after].some(([key, content]) => before.get(key) !== content)) this.owner.contentChanged();
  }

  private apply(type: string, object: unknown): void {
    const r = policyResourceOf(this.kind.kind, object);
    if (!r) return;
    const before = this.table.get(resourceKey(r));
    if (type === "DELETED") {
      this.table.delete(resourceKey(r));
      this.owner.contentChanged();
    } else if (type === "ADDED" || type === "MODIFIED") {
      this.table.set(resourceKey(r), r);
      // A status write changes no content key: nothing to reload.
      if (!before || contentKey(before) !== contentKey(r)) this.owner.contentChanged();
    }
  }
}

/** Every policy custom resource, kept current; the store behind ResourcePolicySource. */
export class PolicyResourceWatch implements PolicyResourceStore {
  readonly log: Logger;
  readonly kube: KubeClient;
  readonly minBackoffMs: number;
  readonly maxBackoffMs: number;
  closed = false;
  private readonly server: string;
  private readonly startTimeoutMs: number;
  private readonly kinds: KindWatch[];
  private readonly lifetime = new AbortController();
  private readonly firstSync = Promise.withResolvers<void>();
  private readonly listeners = new Set<() => void>();
  private starting: Promise<void> | undefined;

  constructor(kube: KubeClient, options: PolicyResourceWatchOptions) {
    this.log = options.logger;
    this.server = kube.connection.server;
    this.kube = kube;
    this.startTimeoutMs = options.startTimeoutMs ?? 10_000;
    this.minBackoffMs = options.minBackoffMs ?? 200;
    this.maxBackoffMs = options.maxBackoffMs ?? 10_000;
    this.kinds = POLICY_RESOURCE_KINDS.map((k) => new KindWatch(k, this));
  }

  /** Starts listing and watching; resolves once every kind is listed, rejects (and stops) saying why if not in time. */
  synced(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("policy resource watch is closed"));
    this.starting ??= this.startAndWait();
    return this.starting;
  }

  snapshot(): PolicyResourceObject[] {
    return this.kinds.flatMap((k) => [...k.table.values()]);
  }

  /** The object as last seen (its status included), for status writes; `key` is its resourceKey. */
  current(kind: string, key: string): PolicyResourceObject | undefined {
    return this.kinds.find((k) => k.kind.kind === kind)?.table.get(key);
  }

  subscribe(changed: () => void, _failed: (err: unknown) => void): { close(): void } {
    this.listeners.add(changed);
    return { close: () => void this.listeners.delete(changed) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.lifetime.abort(new Error("policy resource watch closed"));
    await Promise.all(this.kinds.map((k) => k.stop()));
  }

  // For the kind loops.

  kindListed(): void {
    if (this.kinds.every((k) => k.listed)) this.firstSync.resolve();
  }

  contentChanged(): void {
    if (!this.kinds.every((k) => k.listed)) return;
    for (const l of this.listeners) l();
  }

  async withTimeout<T>(ms: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return await call(AbortSignal.any([this.lifetime.signal, AbortSignal.timeout(ms)]));
  }

  private async startAndWait(): Promise<void> {
    for (const k of this.kinds) k.start();
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.startTimeoutMs)));
    await Promise.race([this.firstSync.promise, gaveUp]);
    clearTimeout(timer);
    if (this.kinds.every((k) => k.listed)) return;
    const missing = this.kinds.filter((k) => !k.listed);
    const reasons = missing.map((k) => {
      const err = k.lastError;
      const hint = hasStatus(err, 404)
        ? ` (the CustomResourceDefinition ${k.kind.plural}.${POLICY_GROUP} is not installed: kubectl apply -k deploy/crds)`
        : hasStatus(err, 403)
          ? ` (the identity used needs list and watch on ${k.kind.plural}.${POLICY_GROUP})`
          : "";
      return `${k.kind.plural}: ${err === undefined ? "no answer" : describeApiError(err)}${hint}`;
    });
    await this.close();
    const first = missing.find((k) => k.lastError !== undefined)?.lastError;
    throw new KubeApiError(
      first === undefined ? "timeout" : kubeApiErrorCode(first),
      `cannot list the policy custom resources from the Kubernetes API at ${this.server} within ${this.startTimeoutMs / 1000} s: ${reasons.join("; ")}`,
    );
  }
}

/**
 * Policies from the custom resources (and `folder`, when given, as part of the same set), with their
 * status and Events written back: what `serve --policy-crds` reads. close() stops the watch.
 */
export function policyResourceSource(
  kube: KubeClient,
  opts: {
    logger: Logger;
    folder?: PolicySource;
    startTimeoutMs?: number;
    exceptionNamespaces?: readonly string[];
    /** false: read the resources without writing their status (a node reads what the server reports on). */
    writeStatus?: boolean;
  },
): { source: ResourcePolicySource; watch: PolicyResourceWatch; status: PolicyStatusWriter | undefined; close(): Promise<void> } {
  const watch = new PolicyResourceWatch(kube, { logger: opts.logger, ...(opts.startTimeoutMs !== undefined ? { startTimeoutMs: opts.startTimeoutMs } : {}) });
  const status =
    opts.writeStatus === false ? undefined : new PolicyStatusWriter(kube, { logger: opts.logger, latest: (kind, key) => watch.current(kind, key) });
  const source = new ResourcePolicySource({
    store: watch,
    ...(status ? { status } : {}),
    ...(opts.folder ? { folder: opts.folder } : {}),
    ...(opts.exceptionNamespaces ? { exceptionNamespaces: opts.exceptionNamespaces } : {}),
  });
  return {
    source,
    watch,
    status,
    close: async () => {
      await watch.close();
      status?.close();
      await status?.flush();
    },
  };
}
