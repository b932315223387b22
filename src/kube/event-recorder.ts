// Kubernetes Events for what the webhooks did to an object (images pinned, tags that could not be
// resolved). Best effort and off the answer path: an Event that cannot be written is logged, never awaited.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { KubeClient } from "./kube-client.ts";

export interface EventInput {
  /** uid: when known, so `kubectl describe` (which selects the object's Events by UID too) lists the Event. */
  involvedObject: { apiVersion: string; kind: string; name: string; namespace: string; uid?: string };
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

export interface EventSink {
  record(event: EventInput): void;
}

/** Events are capped at 1 KiB of message by convention (kubectl shows them on one line). */
const MAX_MESSAGE = 1024;

/**
 * The Event every writer of Imprimatur's Events creates in `namespace`: named after the object with a random
 * suffix (as client-go's recorder names them), the message capped, seen once now.
 */
export function eventBody(
  e: { involvedObject: { name: string } & Record<string, string>; type: string; reason: string; message: string },
  namespace: string,
  now: Date,
) {
  const base = (e.involvedObject.name || "object").replace(/[^a-z0-9.-]/g, "-").slice(0, 200);
  return {
    metadata: { name: `${base}.${randomBytes(8).toString("hex")}`, namespace },
    involvedObject: e.involvedObject,
    type: e.type,
    reason: e.reason,
    message: e.message.length > MAX_MESSAGE ? `${e.message.slice(0, MAX_MESSAGE - 3)}...` : e.message,
    source: { component: "imprimatur" },
    reportingComponent: "imprimatur",
    reportingInstance: process.env.HOSTNAME ?? "imprimatur",
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}

export class EventRecorder implements EventSink {
  private readonly kube: KubeClient;
  private readonly logger: Logger;
  private readonly pending = new Set<Promise<void>>();

  constructor(kubeConfig: KubeClient, logger: Logger) {
    this.kube = kubeConfig;
    this.logger = logger;
  }

  record(e: EventInput): void {
    const namespace = e.involvedObject.namespace || "default";
    const body = eventBody({ ...e, involvedObject: { ...e.involvedObject, namespace } }, namespace, new Date());
    const write = this.kube
      .request("POST", `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body })
      .then(() => undefined)
      .catch((err: unknown) =>
        this.logger.warn({ err: (err as Error).message, reason: e.reason, object: e.involvedObject }, "could not write a Kubernetes Event"),
      );
    this.pending.add(write);
    void write.finally(() => this.pending.delete(write));
  }

  /** Waits for Events still being written (shutdown, tests). */
  async flush(): Promise<void> {
    await Promise.all([...this.pending]);
  }
}
