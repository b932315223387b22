// The post-creation audit (the Image Provenance design's "post-pod-creation audit"): admission sees a pod once,
// but policies change, tags move, backends were down when it was admitted (fail-open), and static pods never
// passed it. The scanner keeps every pod of the cluster in view (a paged list, then a watch: src/kube/pod-informer.ts),
// judges each as it runs (src/scan/pod-audit.ts) when it changes, every pod when the policies change and at
// each full rescan, at a bounded rate, and writes one policy report per pod with what it found.
//
// Only the leader scans (a Lease): replicas would write the same reports. A new leader lists and judges
// everything again; the report writer compares before it writes, so a leader change neither loses a result nor
// writes one twice (reports are named by the pod's UID).
import { createHash } from "node:crypto";
import type { KubeClient } from "../kube/kube-client.ts";
import type { Logger } from "pino";
import type { ResourceScan, ScanResult } from "../core/policy-reports/resource-scan.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import type { Engine } from "../engine/engine.ts";
import type { LeaderElector } from "../kube/leader-election.ts";
import { PodInformer, type PodObject } from "../kube/pod-informer.ts";
import type { PolicyReportSink, ReportWriteOutcome } from "../kube/policy-report-writer.ts";
import type { EventSink } from "../kube/event-recorder.ts";
import type { ReportFormat } from "../core/policy-reports/report-formats.ts";
import { describeSquatter } from "../core/policy-reports/report-ownership.ts";
import { auditPod, scanOf } from "./pod-audit.ts";
import { ReportQueue } from "./report-queue.ts";
import { ScanPacer } from "./scan-pacer.ts";

/** What the scanner reports to Prometheus (src/server/metrics.ts). */
export interface ScanRecorder {
  podScanned(outcome: "pass" | "fail" | "error"): void;
  fullScan(seconds: number): void;
  watchRestarted(): void;
  reportWriteFailed(): void;
  /** A report at a pod's report name was not Imprimatur's: overwritten, or left because RBAC forbids it. */
  reportSquatted(format: ReportFormat, outcome: "overwritten" | "left"): void;
}

export interface AuditScannerOptions {
  engine: Engine;
  kube: KubeClient;
  logger: Logger;
  /** Where reports go; undefined: none are written (metrics and logs only). */
  reports?: PolicyReportSink;
  /** Only the leader scans; undefined: this process always does. */
  leader?: LeaderElector;
  /** Pods judged per second at most (default 20). */
  podsPerSecond?: number;
  /** Every pod judged again this often, for what no event announces: a signature removed, a tag moved (default 1 h). */
  rescanIntervalMs?: number;
  /** A pod with an error result (a backend or registry that could not answer) is judged again this soon (default 30 s). */
  errorRetryMs?: number;
  recorder?: ScanRecorder;
  /** Where a squatted report is reported, as an Event on its pod; undefined: logs and metrics only. */
  events?: EventSink;
  namespace?: string;
  labelSelector?: string;
  /** Namespaces whose pods are left out (those the webhooks leave out: kube-system, Imprimatur's own). */
  excludeNamespaces?: readonly string[];
}

/** The counts `/metrics` shows as gauges: current violations by policy and result. */
export type ViolationCounts = Map<string, { policy: string; result: ScanResult["result"]; count: number }>;

/**
 * A pod in view, kept as its JSON text until it is judged: the text is about a third of the memory of the parsed
 * object (whose repeated strings, such as toleration keys, are each a string of their own), and a pod in view is
 * parsed only when it is judged (its changes, the policies' changes, a rescan). Each version is an object of its
 * own, so "the same version" is identity.
 */
interface PodInView {
  readonly json: string;
  readonly namespace: string | undefined;
}

export class AuditScanner {
  private readonly opts: AuditScannerOptions;
  private readonly pods = new Map<string, PodInView>();
  /** What each pod was last judged as (its content key's hash), so a status heartbeat does not judge it again. */
  private readonly judgedAs = new Map<string, string>();
  private readonly results = new Map<string, readonly ScanResult[]>();
  private readonly queue = new Set<string>();
  private informer: PodInformer<PodListed | undefined> | undefined;
  private worker: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private closed = false;
  /** Report writes on their way; a write's end wakes the worker (a scan is complete once they are done). */
  private readonly writes = new ReportQueue(() => this.wake?.());
  /** Pods to judge again because their last judgment had an error result, by the timer that will queue them. */
  private readonly retries = new Map<string, NodeJS.Timeout>();
  /** When the running full scan began (its first list or its rescan), until the queue drains. */
  private fullScanStarted: number | undefined;
  /** Whether the informer has listed the pods since this replica began to scan: before that, no scan is complete. */
  private listedOnce = false;

  constructor(opts: AuditScannerOptions) {
    this.opts = opts;
  }

  start(): void {
    if (!this.opts.leader) return this.activate();
    this.unsubscribe = this.opts.leader.onLeadershipChange((leading) => (leading ? this.activate() : void this.deactivate()));
    if (this.opts.leader.isLeader()) this.activate();
  }

  /** Every pod is judged again: the policies changed. */
  policiesChanged(): void {
    if (!this.informer) return;
    this.judgedAs.clear();
    this.startFullScan();
  }

  /** Current violations by policy and result, over every pod in view. */
  violationCounts(): ViolationCounts {
    const counts: ViolationCounts = new Map();
    for (const results of this.results.values())
      for (const r of results) {
        const key = `${r.policy}\u0000${r.result}`;
        const entry = counts.get(key) ?? { policy: r.policy, result: r.result, count: 0 };
        entry.count++;
        counts.set(key, entry);
      }
    return counts;
  }

  /** Whether a scan is under way (the queue holds pods); for tests and /readyz-style probes. */
  get pending(): number {
    return this.queue.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    await this.deactivate();
  }

  private activate(): void {
    if (this.closed || this.informer) return;
    this.opts.logger.info({}, "background scan: scanning running pods");
    this.informer = new PodInformer(
      this.opts.kube,
      {
        upsert: (pod) => this.seen(listedPod(pod, this.opts.excludeNamespaces)),
        remove: (pod) => void this.gone(uidOf(pod)),
        keep: (pod) => listedPod(pod, this.opts.excludeNamespaces),
        listed: (pods) => this.listed(pods),
        restarted: (err) => {
          this.opts.recorder?.watchRestarted();
          this.opts.logger.debug({ err: (err as Error)?.message }, "background scan: pod watch restarted");
        },
      },
      {
        logger: this.opts.logger,
        ...(this.opts.namespace ? { namespace: this.opts.namespace } : {}),
        ...(this.opts.labelSelector ? { labelSelector: this.opts.labelSelector } : {}),
      },
    );
    this.fullScanStarted = Date.now();
    this.informer.start();
    this.worker = this.work();
    const interval = this.opts.rescanIntervalMs ?? 3_600_000;
    this.rescanTimer = setInterval(() => {
      this.judgedAs.clear();
      this.startFullScan();
    }, interval);
    this.rescanTimer.unref();
  }

  private async deactivate(): Promise<void> {
    const informer = this.informer;
    if (!informer) return;
    this.informer = undefined;
    this.listedOnce = false;
    clearInterval(this.rescanTimer);
    for (const timer of this.retries.values()) clearTimeout(timer);
    this.retries.clear();
    this.queue.clear();
    this.wake?.();
    await informer.close();
    await this.worker;
    this.pods.clear();
    this.judgedAs.clear();
    this.results.clear();
    this.opts.logger.info({}, "background scan: stopped scanning (no longer the leader)");
  }

  private startFullScan(): void {
    this.fullScanStarted ??= Date.now();
    void this.opts.reports
      ?.refreshIndex?.()
      .catch((err: unknown) => this.opts.logger.warn({ err: (err as Error).message }, "background scan: cannot list existing reports"));
    for (const uid of this.pods.keys()) this.queue.add(uid);
    this.wake?.();
  }

  private seen(pod: PodListed | undefined): void {
    if (!pod) return;
    this.pods.set(pod.uid, pod.inView);
    if (this.judgedAs.get(pod.uid) !== pod.key) {
      this.queue.add(pod.uid);
      this.wake?.();
    }
  }

  private listed(pods: readonly (PodListed | undefined)[]): void {
    this.listedOnce = true;
    const now = new Set<string>();
    for (const pod of pods) if (pod) now.add(pod.uid);
    for (const uid of [...this.pods.keys()]) if (!now.has(uid)) void this.gone(uid);
    this.fullScanStarted ??= Date.now();
    void this.opts.reports
      ?.refreshIndex?.()
      .catch((err: unknown) => this.opts.logger.warn({ err: (err as Error).message }, "background scan: cannot list existing reports"));
    for (const pod of pods) this.seen(pod);
    // An empty list completes the scan too: the worker says so.
    this.wake?.();
  }

  private async gone(uid: string): Promise<void> {
    if (!uid) return;
    const namespace = this.pods.get(uid)?.namespace;
    this.pods.delete(uid);
    this.judgedAs.delete(uid);
    this.results.delete(uid);
    this.queue.delete(uid);
    clearTimeout(this.retries.get(uid));
    this.retries.delete(uid);
    // The garbage collector removes a deleted pod's report (it owns it); clearing keeps the writer's index right,
    // after a write of its report that is still on its way.
    await this.writes.settled(uid);
    try {
      await this.opts.reports?.clear({ uid, ...(namespace !== undefined ? { namespace } : {}) });
    } catch (err) {
      this.opts.logger.debug({ err: (err as Error).message, uid }, "background scan: report of a deleted pod not cleared (the garbage collector removes it)");
    }
  }

  /**
   * Judges queued pods, a few at a time (a judgment may wait on a registry or the apiserver), starting at most
   * podsPerSecond of them per second. A pod is never judged twice at once, and its reports are written in order.
   * A full scan is complete when every pod is judged and every report written.
   */
  private async work(): Promise<void> {
    const pacer = new ScanPacer(this.opts.podsPerSecond ?? 20);
    const inFlight = new Map<string, Promise<void>>();
    while (this.informer && !this.closed) {
      let uid: string | undefined;
      for (const queued of this.queue)
        if (!inFlight.has(queued)) {
          uid = queued;
          break;
        }
      // Judging waits for the report writes when too many are waiting (MAX_REPORT_WRITES_WAITING).
      if (uid === undefined || inFlight.size >= MAX_JUDGMENTS_IN_FLIGHT || this.writes.size >= MAX_REPORT_WRITES_WAITING) {
        if (inFlight.size > 0) {
          await Promise.race([...inFlight.values(), new Promise<void>((resolve) => (this.wake = resolve))]);
          this.wake = undefined;
          continue;
        }
        // A scan is complete when its reports are written too (a write wakes the worker when it ends).
        if (this.writes.size > 0) {
          await new Promise<void>((resolve) => (this.wake = resolve));
          this.wake = undefined;
          continue;
        }
        if (this.fullScanStarted !== undefined && this.listedOnce) {
          this.opts.recorder?.fullScan((Date.now() - this.fullScanStarted) / 1000);
          this.opts.logger.info({ pods: this.pods.size, seconds: (Date.now() - this.fullScanStarted) / 1000 }, "background scan: every pod judged");
          this.fullScanStarted = undefined;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      this.queue.delete(uid);
      const pod = this.pods.get(uid);
      if (!pod) continue;
      const judging = this.judge(uid, pod)
        .catch((err: unknown) => this.opts.logger.warn({ err: (err as Error).message, uid }, "background scan: pod not judged"))
        .finally(() => inFlight.delete(uid));
      inFlight.set(uid, judging);
      const wait = pacer.started();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    await Promise.all(inFlight.values());
    await this.writes.all();
  }

  private retry(uid: string): void {
    if (this.retries.has(uid)) return;
    const timer = setTimeout(() => {
      this.retries.delete(uid);
      if (!this.pods.has(uid) || !this.informer) return;
      this.judgedAs.delete(uid);
      this.queue.add(uid);
      this.wake?.();
    }, this.opts.errorRetryMs ?? 30_000);
    timer.unref();
    this.retries.set(uid, timer);
  }

  private async judge(uid: string, inView: PodInView): Promise<void> {
    const pod = JSON.parse(inView.json) as PodObject;
    const key = contentKey(pod);
    // The pods are the server's own cluster's: judged by the policies spec.clusters gives it (serve --cluster-name).
    const audit = await auditPod(this.opts.engine, pod, undefined, { ownCluster: true });
    // The pod may have changed or gone while it was judged: a newer version is in the queue, or it is gone.
    if (this.pods.get(uid) !== inView) return;
    this.judgedAs.set(uid, key);
    this.results.set(uid, audit.results);
    const outcome = audit.results.some((r) => r.result === "fail") ? "fail" : audit.results.some((r) => r.result === "error") ? "error" : "pass";
    this.opts.recorder?.podScanned(outcome);
    // Not fully judged (a backend was down, as it may have been at admission): judged again soon, not in an hour.
    if (audit.results.some((r) => r.result === "error")) this.retry(uid);
    if (outcome !== "pass") {
      const meta = asObject(pod.metadata);
      this.opts.logger.debug({ namespace: meta?.namespace, pod: meta?.name, results: audit.results.length }, "background scan: pod breaks policy");
    }
    if (this.opts.reports) this.writeReport(uid, inView, podNamed(pod), scanOf(audit), this.opts.reports);
  }

  /** The pod's report, written beside the judging (ReportQueue); a failed write has the pod judged again soon. */
  private writeReport(uid: string, inView: PodInView, pod: PodName, scan: ResourceScan, reports: PolicyReportSink): void {
    this.writes.add(uid, async () => {
      try {
        const outcomes = await reports.write(scan);
        for (const outcome of outcomes) if (outcome.squatter) this.squatted(pod, outcome);
      } catch (err) {
        this.opts.recorder?.reportWriteFailed();
        // Judged again, and the report written, after --scan-error-retry (or at the pod's next change, if sooner):
        // an API that refused one write must not leave the pod unreported until the next rescan.
        if (this.pods.get(uid) === inView) this.judgedAs.delete(uid);
        this.retry(uid);
        this.opts.logger.warn({ err: (err as Error).message, uid }, "background scan: policy report not written");
      }
    });
  }

  /**
   * Someone else's report sat at the pod's report name (a tenant's "all passed", or another tool's writing the same
   * API): reported on the pod, counted and logged, whether it was overwritten or left because RBAC forbids it.
   */
  private squatted({ name, namespace, uid }: PodName, outcome: ReportWriteOutcome): void {
    const overwritten = outcome.action === "reclaimed";
    const report = `${outcome.kind} ${outcome.namespace ? `${outcome.namespace}/` : ""}${outcome.name}`;
    const message =
      `${report}, at this pod's report name, was not written by Imprimatur: it is ${describeSquatter(outcome.squatter!, "Pod")}; ` +
      (overwritten ? "overwritten with Imprimatur's findings" : `left: ${outcome.reason ?? "it could not be replaced"}`);
    this.opts.recorder?.reportSquatted(outcome.format, overwritten ? "overwritten" : "left");
    this.opts.events?.record({
      involvedObject: { apiVersion: "v1", kind: "Pod", name, namespace, uid },
      type: "Warning",
      reason: "PolicyReportSquatted",
      message,
    });
    this.opts.logger.warn(
      { namespace, pod: name, report, format: outcome.format, overwritten, squatter: outcome.squatter },
      "background scan: policy report squatted",
    );
  }
}

/** What a report write keeps of its pod (not the whole pod: writes may queue behind one another). */
interface PodName {
  name: string;
  namespace: string;
  uid: string;
}

function podNamed(pod: PodObject): PodName {
  const meta = asObject(pod.metadata) ?? {};
  const text = (v: unknown): string => (typeof v === "string" ? v : "");
  return { name: text(meta.name), namespace: text(meta.namespace), uid: text(meta.uid) };
}

/** Pods judged at once: enough to overlap registry lookups, few enough to spare them (report writes go apart). */
export const MAX_JUDGMENTS_IN_FLIGHT = 4;
/**
 * Pods judged whose reports wait to be written, at most; past it the judging waits for a write to end. Judging
 * outruns the writes (the apiserver takes about 250 reports a second), and each waiting write holds its pod's
 * results: unbounded, a full scan held every failing pod's (13 MiB more at 5,000 pods, bench/background-scan.md)
 * and a slow apiserver let the queue grow with the cluster. Four times the writer's requests in flight keeps it busy.
 */
export const MAX_REPORT_WRITES_WAITING = 16;

/** A pod as the scanner takes it in: in view, and what it is judged on; undefined for one without a uid or excluded. */
interface PodListed {
  uid: string;
  inView: PodInView;
  key: string;
}

function listedPod(pod: PodObject, excludeNamespaces: readonly string[] | undefined): PodListed | undefined {
  const uid = uidOf(pod);
  if (!uid || excludeNamespaces?.includes(pod.metadata?.namespace ?? "")) return undefined;
  const namespace = pod.metadata?.namespace;
  return { uid, inView: { json: JSON.stringify(pod), namespace: typeof namespace === "string" ? namespace : undefined }, key: contentKey(pod) };
}

function uidOf(pod: PodObject): string {
  const uid = pod.metadata?.uid;
  return typeof uid === "string" ? uid : "";
}

/**
 * What a pod is judged on: its spec, its labels and annotations, and the images its status reports. Not its
 * resourceVersion: the kubelet updates status (conditions, restarts) often, which changes nothing to judge.
 * Kept as a SHA-256 of that text (the text is most of the pod again).
 */
function contentKey(pod: PodObject): string {
  const meta = asObject(pod.metadata) ?? {};
  const status = asObject(pod.status) ?? {};
  const imageIds = ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"].map((k) =>
    (Array.isArray(status[k]) ? (status[k] as unknown[]) : []).map((s) => [asObject(s)?.name, asObject(s)?.imageID]),
  );
  return createHash("sha256")
    .update(JSON.stringify([pod.spec, meta.labels, meta.annotations, imageIds]))
    .digest("base64url");
}
