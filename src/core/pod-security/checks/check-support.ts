// What every PSA check file shares: the shape of a check, the pod as the checks read it (containers in PSA's
// visiting order: init containers, containers, ephemeral containers), where a finding lies in that pod, and the
// wording helpers PSA's checks share (names quoted and joined with ", ", "container"/"containers" by their number,
// sorted sets as Go's sets.List gives them). A check words the pod as PSA computes it from the pod; where the
// allowed values depend on the policy version (sysctls, SELinux types), it takes the bad values from the findings.
import { isObject } from "../../primitives/json-shapes.ts";
import type { PodUnderReview } from "../../pod-under-review.ts";
import type { Finding } from "../../pod-restriction/restrictions/restriction-support.ts";

export type PsaLevel = "baseline" | "restricted";

/** A policy version as the profiles' version tables write it. */
export type PolicyVersionTag = `v1.${number}`;

/** A check's wording of one pod: the detail, and a reason when it differs from the check's (e.g. by number). */
export interface CheckWords {
  reason?: string;
  detail: string;
}

/** One Pod Security Admission check (policy/check_<id>.go): what it is, and how PSA words a pod that fails it. */
export interface PsaCheck {
  /** PSA's check ID. */
  id: string;
  level: PsaLevel;
  /**
   * The policy versions the check changed at, oldest first, as PSA's VersionedCheck MinimumVersions and the
   * profile's version table list them: the check exists from the first one on. A check the same in every version
   * has ["v1.0"].
   */
  versions: readonly PolicyVersionTag[];
  /**
   * The pod fields the check reads, in any of its versions (exemptions included), for documentation and tests:
   * `[*]` is every item of a list, `annotations[prefix/*]` every annotation whose key has the prefix.
   */
  reads: readonly string[];
  /** PSA's ForbiddenReason. */
  reason: string;
  /** PSA's ForbiddenDetail; undefined when the pod does not show what the findings say (then the reason stands alone). */
  detail: (pod: PodView, findings: readonly LocatedFinding[]) => CheckWords | undefined;
}

/** A container of the pod, in PSA's visiting order. */
export interface ContainerView {
  name: string;
  value: Record<string, unknown>;
  securityContext: Record<string, unknown> | undefined;
}

export interface PodView {
  metadata: Record<string, unknown>;
  spec: Record<string, unknown>;
  podSecurityContext: Record<string, unknown> | undefined;
  containers: ContainerView[];
  /** Containers by their list and index ("containers[0]"). */
  byPath: Map<string, ContainerView>;
}

/** Where a finding is, relative to the pod. */
export type LocatedFinding =
  | { at: "pod"; rest: string; finding: Finding }
  | { at: "container"; container: ContainerView | undefined; rest: string; finding: Finding }
  | { at: "volume"; index: number; rest: string; finding: Finding }
  | { at: "sysctl"; index: number; finding: Finding }
  | { at: "annotation"; key: string; finding: Finding }
  | { at: "other"; finding: Finding };

/** The container lists in PSA's visiting order: init containers, containers, ephemeral containers. */
const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

export function podViewOf(pod: PodUnderReview): PodView {
  const spec = isObject(pod.spec.value) ? pod.spec.value : {};
  const metadata = isObject(pod.metadata.value) ? pod.metadata.value : {};
  const containers: ContainerView[] = [];
  const byPath = new Map<string, ContainerView>();
  for (const list of CONTAINER_LISTS) {
    const items = Array.isArray(spec[list]) ? (spec[list] as unknown[]) : [];
    items.forEach((item, i) => {
      const value = isObject(item) ? item : {};
      const view: ContainerView = {
        name: typeof value.name === "string" ? value.name : "",
        value,
        securityContext: isObject(value.securityContext) ? value.securityContext : undefined,
      };
      containers.push(view);
      byPath.set(`${list}[${i}]`, view);
    });
  }
  return { metadata, spec, podSecurityContext: isObject(spec.securityContext) ? spec.securityContext : undefined, containers, byPath };
}

export function locateFinding(f: Finding, pod: PodUnderReview, view: PodView): LocatedFinding {
  const specPrefix = pod.spec.field ? `${pod.spec.field}.` : "";
  const metaPrefix = pod.metadata.field ? `${pod.metadata.field}.` : "";
  if (f.field.startsWith(`${metaPrefix}annotations[`) && f.field.endsWith("]")) {
    return { at: "annotation", key: f.field.slice(`${metaPrefix}annotations[`.length, -1), finding: f };
  }
  if (!f.field.startsWith(specPrefix)) return { at: "other", finding: f };
  const rest = f.field.slice(specPrefix.length);
  const container = /^((?:initContainers|containers|ephemeralContainers)\[\d+\])(?:\.(.*))?$/.exec(rest);
  if (container) return { at: "container", container: view.byPath.get(container[1] ?? ""), rest: container[2] ?? "", finding: f };
  const volume = /^volumes\[(\d+)\](?:\.(.*))?$/.exec(rest);
  if (volume) return { at: "volume", index: Number(volume[1]), rest: volume[2] ?? "", finding: f };
  const sysctl = /^securityContext\.sysctls\[(\d+)\]/.exec(rest);
  if (sysctl) return { at: "sysctl", index: Number(sysctl[1]), finding: f };
  return { at: "pod", rest, finding: f };
}

/** The same container field in every container list, for a check's `reads`. */
export function inEveryContainer(...paths: string[]): string[] {
  return CONTAINER_LISTS.flatMap((list) => paths.map((path) => `spec.${list}[*].${path}`));
}

export function pluralize(singular: string, plural: string, count: number): string {
  return count === 1 ? singular : plural;
}

/** PSA's joinQuote: `"a", "b"` (no escaping, as PSA does not escape either). */
export function joinQuote(items: readonly string[]): string {
  return items.length === 0 ? "" : `"${items.join('", "')}"`;
}

/** A sorted set, as Go's sets.List() gives it. */
export function sortedSet(items: Iterable<string>): string[] {
  return [...new Set(items)].sort(byteOrder);
}

/** Go's string order (the IDs and values compared are ASCII). */
export function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `container "a"` / `containers "a", "b"`. */
export function containersPhrase(names: readonly string[]): string {
  return `${pluralize("container", "containers", names.length)} ${joinQuote(names)}`;
}

/** `pod and containers "a", "b"`: who set a bad value, pod first. */
export function setters(podBad: boolean, containers: readonly string[]): string[] {
  const out = podBad ? ["pod"] : [];
  if (containers.length > 0) out.push(containersPhrase(containers));
  return out;
}

export function names(containers: readonly ContainerView[]): string[] {
  return containers.map((c) => c.name);
}

export function field(obj: Record<string, unknown> | undefined, ...path: string[]): unknown {
  let v: unknown = obj;
  for (const key of path) v = isObject(v) ? v[key] : undefined;
  return v;
}

export function isSet(v: unknown): boolean {
  return v !== undefined && v !== null;
}

export function stringList(v: unknown): string[] {
  return Array.isArray(v) ? v.map((x) => String(x)) : [];
}

export function volumes(v: PodView): Array<Record<string, unknown>> {
  return (Array.isArray(v.spec.volumes) ? v.spec.volumes : []).map((vol) => (isObject(vol) ? vol : {}));
}

export function volumeName(vol: Record<string, unknown> | undefined): string {
  return typeof vol?.name === "string" ? vol.name : "";
}
