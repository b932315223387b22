// Writes the background scanner's findings as policy reports (docs/policy-reports.md): one report per resource
// and per chosen format, named by the resource's UID and owned by it. Creates a report, replaces it when its
// results changed (with the resourceVersion read, so a concurrent writer is never overwritten blindly), leaves it
// alone when they did not, and deletes it when the resource has no result left. A report at the name that is not
// Imprimatur's (a tenant's "all passed", or another tool's: src/core/policy-reports/report-ownership.ts) is
// replaced whole, and the outcome says so ("reclaimed", with what it claimed to be) for the caller to report; where
// the server's RBAC forbids the replace, it is left and the outcome says that ("squatted"), rather than an error
// that would have the caller retry.
//
// Idempotent by comparison: a rescan that finds the same results writes nothing (src/core/policy-reports/
// report-update.ts), so a new leader that scans everything again neither bumps nor duplicates a report. A
// resource deleted meanwhile is no error: its report, if written, names a gone owner and the garbage collector
// removes it.
//
// The comparison needs the stored report. By default the writer keeps an index of the reports it manages, filled
// by one paginated list per kind (by the managed-by label) the first time it needs it, and kept up to date by its
// own writes: a rescan of unchanged or clean resources then costs no request at all. Another writer's change is
// seen at the next refreshIndex() (the scanner calls it when a full scan starts) or at the 409 a stale write gets.
// With `index: false` it reads each report before writing it instead, and deletes without knowing.
import pLimit from "p-limit";
import { describeApiError, KubeApiError } from "./api-requests.ts";
import type { KubeClient, KubeRequestOptions } from "./kube-client.ts";
import { PolicyReportError } from "../core/policy-reports/policy-report-error.ts";
import { hasErrorCode } from "../errors/imprimatur-error.ts";
import { buildPolicyReport } from "../core/policy-reports/policy-report-objects.ts";
import { DEFAULT_REPORT_FORMATS, reportApi, type ReportApi, type ReportFormat } from "../core/policy-reports/report-formats.ts";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../core/policy-reports/report-metadata.ts";
import type { SquattedReport } from "../core/policy-reports/report-ownership.ts";
import { planReportWrite, type StoredReport } from "../core/policy-reports/report-update.ts";
import { isNamespaced, type ReportedResource, type ResourceScan } from "../core/policy-reports/resource-scan.ts";
import { validateResourceScan } from "../core/policy-reports/validate-resource-scan.ts";

/** What became of one report. */
export type ReportAction =
  /** Written for the first time. */
  | "created"
  /** Its results changed: replaced. */
  | "replaced"
  /** Already said the same: not written. */
  | "unchanged"
  /** No result left: deleted. */
  | "deleted"
  /** No result left, and there was no report. */
  | "absent"
  /** The resource's namespace is gone (and the resource with it): nothing to write. */
  | "owner-gone"
  /** A report at its name that was not Imprimatur's (squatted): replaced whole with Imprimatur's. */
  | "reclaimed"
  /** A report at its name that was not Imprimatur's, which the server's RBAC forbids replacing: left. */
  | "squatted";

export interface ReportWriteOutcome {
  format: ReportFormat;
  /** PolicyReport, ClusterPolicyReport, Report or ClusterReport. */
  kind: string;
  namespace?: string;
  /** The resource's UID. */
  name: string;
  action: ReportAction;
  /** reclaimed and squatted: what the report found at the name claimed to be. */
  squatter?: SquattedReport;
  /** squatted: why it could not be replaced. */
  reason?: string;
}

/** What the scanner calls. */
export interface PolicyReportSink {
  /** Writes the scan's results in every chosen format; no results deletes the resource's reports (it was fixed). */
  write(scan: ResourceScan): Promise<ReportWriteOutcome[]>;
  /** Deletes the resource's reports in every chosen format (only uid and namespace matter); none is no error. */
  clear(resource: Pick<ReportedResource, "uid" | "namespace">): Promise<ReportWriteOutcome[]>;
  /** Reads the stored reports again (when a full scan starts), so changes by other writers are seen. */
  refreshIndex(): Promise<void>;
}

export interface PolicyReportWriterOptions {
  /** The formats to write (default: wgpolicyk8s alone). */
  formats?: readonly ReportFormat[];
  /** API requests in flight at once, for all reports together (default 4). */
  maxInFlight?: number;
  /** Per request (default 10 s). */
  requestTimeoutMs?: number;
  /** Keep an index of the stored reports (default true; needs `list` on the report kinds). */
  index?: boolean;
  /** Reports per page when filling the index (default 250). */
  listPageSize?: number;
}

const DEFAULT_MAX_IN_FLIGHT = 4;
const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
/** Read-compare-write rounds before giving up on a report another writer keeps changing. */
const MAX_ATTEMPTS = 5;
const DEFAULT_LIST_PAGE_SIZE = 250;
const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

export class PolicyReportWriter implements PolicyReportSink {
  readonly formats: readonly ReportFormat[];
  private readonly kube: KubeClient;
  private readonly inFlight: ReturnType<typeof pLimit>;
  private readonly requestTimeoutMs: number;
  /** One operation at a time per resource (by UID), in the order asked, so a clear never overtakes a write. */
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly useIndex: boolean;
  private readonly listPageSize: number;
  /** The stored reports by kind, then by "NAMESPACE/NAME" ("/NAME" for cluster reports); filled once, then kept. */
  private readonly stored = new Map<string, Map<string, StoredReport>>();
  private indexing: Promise<void> | undefined;
  /** Own writes made while a list runs: the list may predate them, so they are applied again after it. */
  private writtenDuringList: Array<{ where: Where; report: StoredReport | undefined }> | undefined;

  constructor(kube: KubeClient, opts: PolicyReportWriterOptions = {}) {
    const formats = opts.formats ?? DEFAULT_REPORT_FORMATS;
    if (formats.length === 0) throw new PolicyReportError("invalid-format", "no report format chosen");
    this.formats = [...new Set(formats)];
    this.kube = kube;
    this.inFlight = pLimit(opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT);
    this.requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.useIndex = opts.index ?? true;
    this.listPageSize = opts.listPageSize ?? DEFAULT_LIST_PAGE_SIZE;
  }

  refreshIndex(): Promise<void> {
    if (!this.useIndex) return Promise.resolve();
    const run = this.fillIndex();
    this.indexing = run;
    // A failed fill is tried again by the next operation that needs the index.
    run.catch(() => {
      if (this.indexing === run) this.indexing = undefined;
    });
    return run;
  }

  write(scan: ResourceScan): Promise<ReportWriteOutcome[]> {
    try {
      validateResourceScan(scan);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    if (scan.results.length === 0) return this.clear(scan.resource);
    return this.serialized(scan.resource.uid, () => this.eachFormat((format) => this.upsert(format, scan)));
  }

  clear(resource: Pick<ReportedResource, "uid" | "namespace">): Promise<ReportWriteOutcome[]> {
    if (typeof resource.uid !== "string" || resource.uid === "")
      return Promise.reject(new PolicyReportError("invalid-scan", "clear: resource.uid is required"));
    return this.serialized(resource.uid, () => this.eachFormat((format) => this.remove(format, resource)));
  }

  /** Waits for the operations queued so far (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.queues.size > 0) await Promise.allSettled([...this.queues.values()]);
  }

  private serialized<T>(uid: string, run: () => Promise<T>): Promise<T> {
    const next = (this.queues.get(uid) ?? Promise.resolve()).then(run, run);
    this.queues.set(uid, next);
    void next
      .catch(() => undefined)
      .finally(() => {
        if (this.queues.get(uid) === next) this.queues.delete(uid);
      });
    return next;
  }

  /** Runs one operation per format; every format is tried, and the first failure is thrown after. */
  private async eachFormat(run: (format: ReportFormat) => Promise<ReportWriteOutcome>): Promise<ReportWriteOutcome[]> {
    const settled = await Promise.allSettled(this.formats.map(run));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed) throw failed.reason;
    return settled.map((s) => (s as PromiseFulfilledResult<ReportWriteOutcome>).value);
  }

  private async upsert(format: ReportFormat, scan: ResourceScan): Promise<ReportWriteOutcome> {
    const desired = buildPolicyReport(format, scan);
    const api = reportApi(format, isNamespaced(scan.resource));
    const where = { api, namespace: desired.metadata.namespace, name: desired.metadata.name };
    const outcome = (action: ReportAction): ReportWriteOutcome => ({ format, kind: api.kind, namespace: where.namespace, name: where.name, action });
    let stored = this.useIndex ? await this.indexed(where) : await this.read(where);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const plan = planReportWrite(desired, stored);
      if (plan.action === "unchanged") return outcome("unchanged");
      try {
        const written = (await (plan.action === "create"
          ? this.request("create", where, "POST", reportPath(api, where.namespace), { body: plan.body })
          : this.request(plan.action, where, "PUT", reportPath(api, where.namespace, where.name), { body: plan.body }))) as StoredReport;
        this.remember(where, written);
        if (plan.action === "reclaim") return { ...outcome("reclaimed"), squatter: plan.squatter };
        return outcome(plan.action === "create" ? "created" : "replaced");
      } catch (err) {
        // Not Imprimatur's and not Imprimatur's to replace: reported by the caller, and left until the next write.
        if (plan.action === "reclaim" && hasErrorCode(err, "forbidden")) {
          return { ...outcome("squatted"), squatter: plan.squatter, reason: err.message };
        }
        if (err instanceof NotThere && err.namespaceGone) {
          this.remember(where, undefined);
          return outcome("owner-gone");
        }
        // 409: created by another writer since it was read (AlreadyExists), or changed since (Conflict); a 404 on
        // replace: deleted since. Read again and decide again.
        if (!(err instanceof NotThere || err instanceof Changed)) throw err;
        stored = await this.read(where);
        this.remember(where, stored);
      }
    }
    throw new PolicyReportError("conflict", `${describe(where)}: still changing after ${MAX_ATTEMPTS} attempts to write it`);
  }

  private async remove(format: ReportFormat, resource: Pick<ReportedResource, "uid" | "namespace">): Promise<ReportWriteOutcome> {
    const namespaced = isNamespaced({ apiVersion: "", kind: "", name: "", ...resource });
    const api = reportApi(format, namespaced);
    const where = { api, namespace: namespaced ? resource.namespace : undefined, name: resource.uid };
    const outcome = (action: ReportAction): ReportWriteOutcome => ({ format, kind: api.kind, namespace: where.namespace, name: where.name, action });
    // Known not to be there: nothing to ask (a clean resource costs no request).
    if (this.useIndex && (await this.indexed(where)) === undefined) return outcome("absent");
    try {
      await this.request("delete", where, "DELETE", reportPath(api, where.namespace, where.name));
      this.remember(where, undefined);
      return outcome("deleted");
    } catch (err) {
      if (!(err instanceof NotThere)) throw err;
      this.remember(where, undefined);
      return outcome("absent"); // never written, or gone with its owner or its namespace
    }
  }

  /** The stored report as the index knows it (filling the index first if needed). */
  private async indexed(where: Where): Promise<StoredReport | undefined> {
    if (this.indexing === undefined) void this.refreshIndex();
    await this.indexing;
    return this.stored.get(where.api.kind)?.get(indexKey(where.namespace, where.name));
  }

  private remember(where: Where, report: StoredReport | undefined): void {
    if (!this.useIndex) return;
    this.writtenDuringList?.push({ where, report });
    const byName = this.stored.get(where.api.kind) ?? new Map<string, StoredReport>();
    this.stored.set(where.api.kind, byName);
    if (report === undefined) byName.delete(indexKey(where.namespace, where.name));
    else byName.set(indexKey(where.namespace, where.name), report);
  }

  /** Lists every report Imprimatur manages, of every kind it writes, a page at a time. */
  private async fillIndex(): Promise<void> {
    const apis = this.formats.flatMap((format) => [reportApi(format, true), reportApi(format, false)]);
    const written: Array<{ where: Where; report: StoredReport | undefined }> = [];
    this.writtenDuringList = written;
    let lists: StoredReport[][];
    try {
      lists = await Promise.all(apis.map((api) => this.listAll(api)));
    } finally {
      if (this.writtenDuringList === written) this.writtenDuringList = undefined;
    }
    apis.forEach((api, i) => {
      const byName = new Map<string, StoredReport>();
      for (const report of lists[i]!) {
        const metadata = report.metadata ?? {};
        if (typeof metadata.name !== "string") continue;
        byName.set(indexKey(api.namespaced && typeof metadata.namespace === "string" ? metadata.namespace : undefined, metadata.name), report);
      }
      this.stored.set(api.kind, byName);
    });
    for (const { where, report } of written) this.remember(where, report);
  }

  private async listAll(api: ReportApi): Promise<StoredReport[]> {
    const where: Where = { api, namespace: undefined, name: `(all, ${MANAGED_SELECTOR})` };
    const items: StoredReport[] = [];
    let continueToken: string | undefined;
    do {
      const query = { labelSelector: MANAGED_SELECTOR, limit: this.listPageSize, continue: continueToken };
      let list: { items?: StoredReport[]; metadata?: { continue?: string } };
      try {
        // A namespaced kind's path without a namespace lists it in every namespace.
        list = (await this.request("list", where, "GET", reportPath(api, undefined), { query })) as typeof list;
      } catch (err) {
        // 410: the continue token expired (a long list); start over.
        if (err instanceof Expired) {
          items.length = 0;
          continueToken = undefined;
          continue;
        }
        throw err;
      }
      items.push(...(list.items ?? []));
      continueToken = list.metadata?.continue || undefined;
    } while (continueToken);
    return items;
  }

  /** The stored report, or undefined when there is none. */
  private async read(where: Where): Promise<StoredReport | undefined> {
    try {
      return (await this.request("read", where, "GET", reportPath(where.api, where.namespace, where.name))) as StoredReport;
    } catch (err) {
      if (err instanceof NotThere) return undefined;
      throw err;
    }
  }

  /**
   * One API request under the concurrency limit and the timeout. Failures become PolicyReportErrors, except the
   * answers the caller decides on: the report or its namespace is not there (NotThere), or it changed (Changed).
   */
  private async request(verb: Verb, where: Where, method: string, path: string, options: Omit<KubeRequestOptions, "signal"> = {}): Promise<unknown> {
    return this.inFlight(async () => {
      const signal = AbortSignal.timeout(this.requestTimeoutMs);
      try {
        return await this.kube.request(method, path, { ...options, signal });
      } catch (err) {
        if (signal.aborted) {
          throw new PolicyReportError("unavailable", `${verb} ${describe(where)}: no answer within ${this.requestTimeoutMs / 1000} s`, { cause: err });
        }
        throw classify(verb, where, err);
      }
    });
  }
}

type Verb = "read" | "list" | "create" | "replace" | "reclaim" | "delete";

interface Where {
  api: ReportApi;
  namespace: string | undefined;
  name: string;
}

/** 404 for the report itself, or for its namespace. */
class NotThere extends Error {
  readonly namespaceGone: boolean;
  constructor(message: string, namespaceGone: boolean) {
    super(message);
    this.namespaceGone = namespaceGone;
  }
}

/** 409: created by another writer (AlreadyExists), or changed since it was read (Conflict). */
class Changed extends Error {}

/** 410: a list's continue token expired. */
class Expired extends Error {}

function indexKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

/** The reports of `api` in `namespace` (in every namespace, or cluster-scoped, without one), or the one named `name`. */
function reportPath(api: ReportApi, namespace: string | undefined, name?: string): string {
  const scope = namespace === undefined ? "" : `/namespaces/${encodeURIComponent(namespace)}`;
  return `/apis/${api.group}/${api.version}${scope}/${api.plural}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
}

function describe(where: Where): string {
  return `${where.api.kind} ${where.namespace === undefined ? "" : `${where.namespace}/`}${where.name}`;
}

function classify(verb: Verb, where: Where, err: unknown): Error {
  const what = `${verb} ${describe(where)}`;
  if (!(err instanceof KubeApiError)) return new PolicyReportError("unavailable", `${what}: ${describeApiError(err)}`, { cause: err });
  switch (err.httpStatus) {
    case 404: {
      // The report itself, or its namespace (the resource's namespace is gone, and the resource with it); anything
      // else is an API the apiserver does not serve: the CRD is not installed.
      // The Status names the missing resource in details.kind (its plural); "404 page not found" has no Status.
      const missing = err.reason === "NotFound" ? err.details?.kind : undefined;
      if (missing === where.api.plural) return new NotThere(what, false);
      if (missing === "namespaces") return new NotThere(what, true);
      return new PolicyReportError(
        "crd-missing",
        `${what}: the apiserver does not serve ${where.api.plural}.${where.api.group}/${where.api.version}: kubectl apply -k deploy/crds/reports`,
        { cause: err },
      );
    }
    case 409:
      return new Changed(what);
    case 410:
      return new Expired(what);
    case 401:
    case 403:
      return new PolicyReportError("forbidden", `${what}: ${describeApiError(err)}`, { cause: err });
    case 400:
    case 422:
      return new PolicyReportError("rejected", `${what}: ${describeApiError(err)}`, { cause: err });
    default:
      return new PolicyReportError("unavailable", `${what}: ${describeApiError(err)}`, { cause: err });
  }
}
