// Writes what became of each policy custom resource: its status subresource (a Ready condition and the record
// of the generation in force, see status-conditions.ts) and, when the verdict changes, an Event
// on the object. Off the admission path: a write that fails is logged and tried again after a backoff (1 s,
// doubling to 60 s) for as long as the object is the one judged; a newer generation brings its own write.
//
// Every replica writes. The patch is computed from the object as last watched and is skipped when the
// status already says the same, and replicas running the same version reach the same verdict from the
// same objects, so their writes agree and the status does not flap (no leader is needed for that).
import pLimit from "p-limit";
import type { Logger } from "pino";
import { describeApiError } from "../kube/api-requests.ts";
import { eventBody } from "../kube/event-recorder.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import { POLICY_GROUP, POLICY_RESOURCE_KINDS, POLICY_VERSION } from "./policy-crds.ts";
import { resourceOrigin, resourceKey, type PolicyResourceObject } from "./resource-documents.ts";
import { readyCondition, statusPatch, type ResourceOutcome } from "./status-conditions.ts";
import type { PolicyStatusSink } from "./resource-policy-source.ts";

const WRITE_TIMEOUT_MS = 10_000;
/**
 * Status writes (with their Events) in flight at once, for all objects together. A first load of a thousand
 * policies would otherwise send a thousand PATCHes at once, and the apiserver then serves little else.
 */
const MAX_WRITES_IN_FLIGHT = 4;
/** Where Events about cluster-scoped objects live, as client-go's recorder puts them. */
const EVENT_NAMESPACE = "default";

export class PolicyStatusWriter implements PolicyStatusSink {
  private readonly kube: KubeClient;
  private readonly logger: Logger;
  /** The object as last watched, by kind and resourceKey (name, or namespace/name). */
  private readonly latest: (kind: string, key: string) => PolicyResourceObject | undefined;
  private readonly now: () => Date;
  /** One write at a time per object, in order. */
  private readonly queues = new Map<string, Promise<void>>();
  private readonly inFlight = pLimit(MAX_WRITES_IN_FLIGHT);
  /** A failed write's next attempt, by object; replaced by any newer report of it. */
  private readonly retries = new Map<string, NodeJS.Timeout>();
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  private closed = false;

  constructor(
    kube: KubeClient,
    opts: {
      logger: Logger;
      latest: (kind: string, key: string) => PolicyResourceObject | undefined;
      now?: () => Date;
      /** Backoff of a failed write: first delay, doubled up to the last. Default 1 s to 60 s. */
      retryMinMs?: number;
      retryMaxMs?: number;
    },
  ) {
    this.kube = kube;
    this.logger = opts.logger;
    this.latest = opts.latest;
    this.now = opts.now ?? (() => new Date());
    this.retryMinMs = opts.retryMinMs ?? 1_000;
    this.retryMaxMs = opts.retryMaxMs ?? 60_000;
  }

  report(resource: PolicyResourceObject, outcome: ResourceOutcome): void {
    this.enqueue(resource, outcome, undefined);
  }

  /** Stops retrying; writes already queued still run (flush() waits for them). */
  close(): void {
    this.closed = true;
    for (const timer of this.retries.values()) clearTimeout(timer);
    this.retries.clear();
  }

  private enqueue(resource: PolicyResourceObject, outcome: ResourceOutcome, lastDelayMs: number | undefined): void {
    const key = resourceOrigin(resource);
    const pending = this.retries.get(key);
    if (pending) {
      clearTimeout(pending);
      this.retries.delete(key);
    }
    const queued = (this.queues.get(key) ?? Promise.resolve()).then(() =>
      this.inFlight(async () => {
        if (!(await this.write(resource, outcome))) this.retryLater(key, resource, outcome, lastDelayMs);
      }),
    );
    this.queues.set(key, queued);
    void queued.finally(() => {
      if (this.queues.get(key) === queued) this.queues.delete(key);
    });
  }

  /** Waits for the writes queued so far (tests, shutdown); retries not yet due are not waited for. */
  async flush(): Promise<void> {
    while (this.queues.size > 0) await Promise.all([...this.queues.values()]);
  }

  /** The write again after the backoff, unless a newer report of the object comes first. */
  private retryLater(key: string, resource: PolicyResourceObject, outcome: ResourceOutcome, lastDelayMs: number | undefined): void {
    if (this.closed || this.retries.has(key)) return;
    const delayMs = lastDelayMs === undefined ? this.retryMinMs : Math.min(lastDelayMs * 2, this.retryMaxMs);
    const timer = setTimeout(() => {
      this.retries.delete(key);
      this.enqueue(resource, outcome, delayMs);
    }, delayMs);
    timer.unref();
    this.retries.set(key, timer);
  }

  /** False when the status could not be written (worth another attempt); true when written or nothing to write. */
  private async write(resource: PolicyResourceObject, outcome: ResourceOutcome): Promise<boolean> {
    const latest = this.latest(resource.kind, resourceKey(resource));
    // Deleted, replaced or changed since it was judged: nothing to write, or the reload that follows writes it.
    if (!latest || latest.uid !== resource.uid || latest.generation !== resource.generation) return true;
    const now = this.now();
    const patch = statusPatch(latest.object, outcome, now);
    if (!patch) return true;
    const plural = POLICY_RESOURCE_KINDS.find((k) => k.kind === resource.kind)?.plural;
    if (!plural) return true;
    try {
      const namespaced = resource.namespace === undefined ? "" : `/namespaces/${encodeURIComponent(resource.namespace)}`;
      await this.kube.request("PATCH", `/apis/${POLICY_GROUP}/${POLICY_VERSION}${namespaced}/${plural}/${encodeURIComponent(resource.name)}/status`, {
        body: patch,
        contentType: "application/merge-patch+json",
        signal: AbortSignal.timeout(WRITE_TIMEOUT_MS),
      });
    } catch (err) {
      this.logger.warn({ err: describeApiError(err), object: resourceOrigin(resource) }, "could not write the status of a policy resource; trying again");
      return false;
    }
    const condition = readyCondition(outcome, now);
    const before = (latest.object.status as { conditions?: Array<{ type?: string; status?: string }> } | undefined)?.conditions?.find(
      (c) => c.type === "Ready",
    );
    // An Event when the verdict is new: every new rejection, and recovering from one.
    if (condition.status === "False") await this.event(resource, "Warning", condition.reason, condition.message);
    else if (before?.status === "False") await this.event(resource, "Normal", condition.reason, `generation ${outcome.generation} ${condition.message}`);
    return true;
  }

  private async event(resource: PolicyResourceObject, type: "Normal" | "Warning", reason: string, message: string): Promise<void> {
    // A namespaced object's Events are in its namespace, where its owners (who may read Events there) see them.
    const namespace = resource.namespace ?? EVENT_NAMESPACE;
    const involvedObject = {
      apiVersion: `${POLICY_GROUP}/${POLICY_VERSION}`,
      kind: resource.kind,
      name: resource.name,
      ...(resource.namespace !== undefined ? { namespace: resource.namespace } : {}),
      uid: resource.uid,
    };
    const body = eventBody({ involvedObject, type, reason, message }, namespace, new Date());
    try {
      await this.kube.request("POST", `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body, signal: AbortSignal.timeout(WRITE_TIMEOUT_MS) });
    } catch (err) {
      this.logger.warn({ err: describeApiError(err), reason, object: resourceOrigin(resource) }, "could not write a Kubernetes Event");
    }
  }
}
