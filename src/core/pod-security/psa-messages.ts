// Pod Security Admission's wording, for the shipped profiles' findings. Imprimatur decides which checks a pod
// fails (the profile at the namespace's level and version, whose check names are PSA's check IDs); this file says
// it as PSA does, so that runbooks and alerts written for PSA keep matching:
//   violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set
//   securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (…), …
// One reason per failed check, with its detail in parentheses; the checks in PSA's order (the baseline check IDs
// sorted, then the restricted ones sorted: policy/registry.go). Each reason and detail is PSA's
// (policy/check_*.go), computed from the pod as PSA computes it: containers in PSA's order (init containers,
// containers, ephemeral containers), names quoted and joined with ", ", "container"/"containers" by their number.
// Where the allowed values depend on the policy version (sysctls, SELinux types), the values come from the findings.
import { isObject } from "../json-shapes.ts";
import type { PodUnderReview } from "../pod-under-review.ts";
import type { Finding } from "../pod-restriction/restrictions/restriction-support.ts";
import { goQuote } from "./psa-labels.ts";

/** One failed check, as PSA's CheckResult says it. */
export interface PsaCheckResult {
  /** PSA's check ID (the profile's check name). */
  check: string;
  reason: string;
  /** Empty when PSA gives none. */
  detail: string;
}

/** PSA's AggregateCheckResult.ForbiddenDetail: `reason (detail), reason, …`. */
export function forbiddenDetail(results: readonly PsaCheckResult[]): string {
  return results.map((r) => (r.detail ? `${r.reason} (${r.detail})` : r.reason)).join(", ");
}

/** PSA's AggregateCheckResult.ForbiddenReason: the reasons alone, `reason, reason`. */
export function forbiddenReason(results: readonly PsaCheckResult[]): string {
  return results.map((r) => r.reason).join(", ");
}

/** The denial: `violates PodSecurity "restricted:latest": …` (admission/admission.go). */
export function violatesMessage(levelVersion: string, results: readonly PsaCheckResult[]): string {
  return `violates PodSecurity ${JSON.stringify(levelVersion)}: ${forbiddenDetail(results)}`;
}

/** The warning, and the audit-violations annotation: `would violate PodSecurity "restricted:latest": …`. */
export function wouldViolateMessage(levelVersion: string, results: readonly PsaCheckResult[]): string {
  return `would violate PodSecurity ${JSON.stringify(levelVersion)}: ${forbiddenDetail(results)}`;
}

type Level = "baseline" | "restricted";

interface CheckWording {
  level: Level;
  reason: string;
  /** The detail; undefined when the pod does not show what the findings say (then the reason stands alone). */
  detail: (cx: PodView, findings: readonly Located[]) => { reason?: string; detail: string } | undefined;
}

/** A container of the pod, in PSA's visiting order. */
interface ContainerView {
  name: string;
  value: Record<string, unknown>;
  securityContext: Record<string, unknown> | undefined;
}

interface PodView {
  metadata: Record<string, unknown>;
  spec: Record<string, unknown>;
  podSecurityContext: Record<string, unknown> | undefined;
  containers: ContainerView[];
  /** Containers by their list and index ("containers[0]"). */
  byPath: Map<string, ContainerView>;
}

/** Where a finding is, relative to the pod. */
type Located =
  | { at: "pod"; rest: string; finding: Finding }
  | { at: "container"; container: ContainerView | undefined; rest: string; finding: Finding }
  | { at: "volume"; index: number; rest: string; finding: Finding }
  | { at: "sysctl"; index: number; finding: Finding }
  | { at: "annotation"; key: string; finding: Finding }
  | { at: "other"; finding: Finding };

const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

function viewOf(pod: PodUnderReview): PodView {
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

function locate(f: Finding, pod: PodUnderReview, view: PodView): Located {
  const specPrefix = pod.spec.field ? `${pod.spec.field}.` : "";
  const metaPrefix = pod.metadata.field ? `${pod.metadata.field}.` : "";
  if (f.field.startsWith(`${metaPrefix}annotations[`) && f.field.endsWith("]")) {
    return { at: "annotation", key: f.field.slice(`${metaPrefix}annotations[`.length, -1), finding: f };
  }
  if (!f.field.startsWith(specPrefix)) return { at: "other", finding: f };
  const rest = f.field.slice(specPrefix.length);
  const container = /^((?:initContainers|containers|ephemeralContainers)\[\d+\])(?:\.(.*))?$/.exec(rest);
  if (container) return { at: "container", container: view.byPath.get(container[1]!), rest: container[2] ?? "", finding: f };
  const volume = /^volumes\[(\d+)\](?:\.(.*))?$/.exec(rest);
  if (volume) return { at: "volume", index: Number(volume[1]), rest: volume[2] ?? "", finding: f };
  const sysctl = /^securityContext\.sysctls\[(\d+)\]/.exec(rest);
  if (sysctl) return { at: "sysctl", index: Number(sysctl[1]), finding: f };
  return { at: "pod", rest, finding: f };
}

function pluralize(singular: string, plural: string, count: number): string {
  return count === 1 ? singular : plural;
}

/** PSA's joinQuote: `"a", "b"` (no escaping, as PSA does not escape either). */
function joinQuote(items: readonly string[]): string {
  return items.length === 0 ? "" : `"${items.join('", "')}"`;
}

/** A sorted set, as Go's sets.List() gives it. */
function sortedSet(items: Iterable<string>): string[] {
  return [...new Set(items)].sort(byteOrder);
}

function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `container "a"` / `containers "a", "b"`. */
function containersPhrase(names: readonly string[]): string {
  return `${pluralize("container", "containers", names.length)} ${joinQuote(names)}`;
}

function field(obj: Record<string, unknown> | undefined, ...path: string[]): unknown {
  let v: unknown = obj;
  for (const key of path) v = isObject(v) ? v[key] : undefined;
  return v;
}

function isSet(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function stringList(v: unknown): string[] {
  return Array.isArray(v) ? v.map((x) => String(x)) : [];
}

const BASELINE_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

// The volume types PSA names (check_restrictedVolumes.go); any other forbidden source is "unknown".
const NAMED_VOLUME_TYPES = new Set([
  "hostPath",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "gitRepo",
  "nfs",
  "iscsi",
  "glusterfs",
  "rbd",
  "flexVolume",
  "cinder",
  "cephfs",
  "flocker",
  "fc",
  "azureFile",
  "vsphereVolume",
  "quobyte",
  "azureDisk",
  "photonPersistentDisk",
  "portworxVolume",
  "scaleIO",
  "storageos",
]);

const SECCOMP_ALLOWED = new Set(["RuntimeDefault", "Localhost"]);
const APPARMOR_ALLOWED = new Set(["RuntimeDefault", "Localhost"]);

/** `pod and containers "a", "b"`: who set a bad value, pod first. */
function setters(podBad: boolean, containers: readonly string[]): string[] {
  const out = podBad ? ["pod"] : [];
  if (containers.length > 0) out.push(containersPhrase(containers));
  return out;
}

const WORDING: Record<string, CheckWording> = {
  // Baseline (check_*.go of the same names).
  appArmorProfile: {
    level: "baseline",
    reason: "forbidden AppArmor profile",
    detail: (v) => {
      const badValues = new Set<string>();
      const podType = field(v.podSecurityContext, "appArmorProfile", "type");
      const podBad = isSet(field(v.podSecurityContext, "appArmorProfile")) && !APPARMOR_ALLOWED.has(String(podType ?? ""));
      if (podBad) badValues.add(String(podType ?? ""));
      const bad = v.containers.filter((c) => {
        if (!isSet(field(c.securityContext, "appArmorProfile"))) return false;
        const t = String(field(c.securityContext, "appArmorProfile", "type") ?? "");
        if (APPARMOR_ALLOWED.has(t)) return false;
        badValues.add(t);
        return true;
      });
      const who = setters(podBad, names(bad));
      const annotations: string[] = [];
      const meta = isObject(v.metadata.annotations) ? v.metadata.annotations : {};
      for (const [k, value] of Object.entries(meta)) {
        const text = String(value);
        if (k.startsWith("container.apparmor.security.beta.kubernetes.io/") && !(text === "" || text === "runtime/default" || text.startsWith("localhost/")))
          annotations.push(`${k}=${goQuote(text)}`);
      }
      const values = sortedSet(badValues);
      if (annotations.length > 0) {
        values.push(...annotations.sort(byteOrder));
        who.push(pluralize("annotation", "annotations", annotations.length));
      }
      if (who.length === 0) return undefined;
      return {
        reason: pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", values.length),
        detail: `${who.join(" and ")} must not set AppArmor profile type to ${joinQuote(values)}`,
      };
    },
  },
  capabilities_baseline: {
    level: "baseline",
    reason: "non-default capabilities",
    detail: (v) => {
      const caps = new Set<string>();
      const bad = v.containers.filter((c) => {
        const added = stringList(field(c.securityContext, "capabilities", "add")).filter((cap) => !BASELINE_CAPABILITIES.has(cap));
        added.forEach((cap) => caps.add(cap));
        return added.length > 0;
      });
      if (bad.length === 0) return undefined;
      return { detail: `${containersPhrase(names(bad))} must not include ${joinQuote(sortedSet(caps))} in securityContext.capabilities.add` };
    },
  },
  hostNamespaces: {
    level: "baseline",
    reason: "host namespaces",
    detail: (v) => {
      const used = ["hostNetwork", "hostPID", "hostIPC"].filter((k) => v.spec[k] === true);
      return used.length === 0 ? undefined : { detail: sortedSet(used).join(", ") };
    },
  },
  hostPathVolumes: {
    level: "baseline",
    reason: "hostPath volumes",
    detail: (v) => {
      const vols = volumes(v).filter((vol) => isSet(vol.hostPath));
      return vols.length === 0 ? undefined : { detail: `${pluralize("volume", "volumes", vols.length)} ${joinQuote(vols.map(volumeName))}` };
    },
  },
  hostPorts: {
    level: "baseline",
    reason: "hostPort",
    detail: (v) => {
      const ports = new Set<string>();
      const bad = v.containers.filter((c) => {
        let found = false;
        for (const p of Array.isArray(c.value.ports) ? c.value.ports : []) {
          const hostPort = isObject(p) ? p.hostPort : undefined;
          if (typeof hostPort === "number" && hostPort !== 0) {
            ports.add(String(hostPort));
            found = true;
          }
        }
        return found;
      });
      if (bad.length === 0) return undefined;
      const list = sortedSet(ports);
      return {
        detail: `${containersPhrase(names(bad))} ${pluralize("uses", "use", bad.length)} ${pluralize("hostPort", "hostPorts", list.length)} ${list.join(", ")}`,
      };
    },
  },
  hostProbesAndHostLifecycle: {
    level: "baseline",
    reason: "probe or lifecycle host",
    detail: (v) => {
      const bad = new Set<string>();
      const hosts = new Set<string>();
      for (const c of v.containers) {
        const handlers = [
          c.value.livenessProbe,
          c.value.readinessProbe,
          c.value.startupProbe,
          field(c.value, "lifecycle", "postStart"),
          field(c.value, "lifecycle", "preStop"),
        ];
        for (const h of handlers) {
          for (const kind of ["httpGet", "tcpSocket"]) {
            const host = field(isObject(h) ? h : undefined, kind, "host");
            if (typeof host === "string" && host !== "") {
              bad.add(c.name);
              hosts.add(host);
            }
          }
        }
      }
      if (bad.size === 0) return undefined;
      const containers = sortedSet(bad);
      return {
        detail: `${containersPhrase(containers)} ${pluralize("uses", "use", containers.length)} ${pluralize("probe or lifecycle host", "probe or lifecycle hosts", hosts.size)} ${joinQuote(sortedSet(hosts))}`,
      };
    },
  },
  privileged: {
    level: "baseline",
    reason: "privileged",
    detail: (v) => {
      const bad = v.containers.filter((c) => field(c.securityContext, "privileged") === true);
      return bad.length === 0 ? undefined : { detail: `${containersPhrase(names(bad))} must not set securityContext.privileged=true` };
    },
  },
  procMount: { level: "baseline", reason: "procMount", detail: (v) => procMountDetail(v) },
  seLinuxOptions: {
    level: "baseline",
    reason: "seLinuxOptions",
    // The allowed types changed with the policy version: the bad values are the findings'.
    detail: (v, found) => {
      const types = new Set<string>();
      let user = false;
      let role = false;
      let podBad = false;
      const bad = new Set<ContainerView>();
      for (const l of found) {
        const rest = l.at === "pod" || l.at === "container" ? l.rest : "";
        const m = /^(?:securityContext\.)?seLinuxOptions(?:\.(type|user|role))?$/.exec(rest);
        if (!m) continue;
        if (l.at === "pod") podBad = true;
        else if (l.at === "container" && l.container) bad.add(l.container);
        const opts = l.at === "container" ? field(l.container?.securityContext, "seLinuxOptions") : field(v.podSecurityContext, "seLinuxOptions");
        if (m[1] === "type") types.add(String(field(isObject(opts) ? opts : undefined, "type") ?? ""));
        if (m[1] === "user") user = true;
        if (m[1] === "role") role = true;
      }
      const who = setters(
        podBad,
        v.containers.filter((c) => bad.has(c)).map((c) => c.name),
      );
      if (who.length === 0) return undefined;
      const data: string[] = [];
      if (types.size > 0) data.push(`${pluralize("type", "types", types.size)} ${joinQuote(sortedSet(types))}`);
      if (user) data.push("user may not be set");
      if (role) data.push("role may not be set");
      return { detail: `${who.join(" and ")} set forbidden securityContext.seLinuxOptions: ${data.join("; ")}` };
    },
  },
  seccompProfile_baseline: {
    level: "baseline",
    reason: "seccompProfile",
    detail: (v, found) => {
      // Before policy version v1.19 the check reads the seccomp annotations.
      if (found.some((l) => l.at === "annotation")) {
        const forbidden = sortedSet(
          found.flatMap((l) => (l.at === "annotation" ? [`${l.key}=${goQuote(String(field(v.metadata, "annotations", l.key) ?? ""))}`] : [])),
        );
        return { detail: `forbidden ${pluralize("annotation", "annotations", forbidden.length)} ${forbidden.join(", ")}` };
      }
      const values = new Set<string>();
      const podProfile = field(v.podSecurityContext, "seccompProfile");
      const podType = String(field(v.podSecurityContext, "seccompProfile", "type") ?? "");
      const podBad = isSet(podProfile) && !SECCOMP_ALLOWED.has(podType);
      if (podBad) values.add(podType);
      const bad = v.containers.filter((c) => {
        if (!isSet(field(c.securityContext, "seccompProfile"))) return false;
        const t = String(field(c.securityContext, "seccompProfile", "type") ?? "");
        if (SECCOMP_ALLOWED.has(t)) return false;
        values.add(t);
        return true;
      });
      const who = setters(podBad, names(bad));
      if (who.length === 0) return undefined;
      return { detail: `${who.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(values))}` };
    },
  },
  sysctls: {
    level: "baseline",
    reason: "forbidden sysctls",
    // The allowed sysctls changed with the policy version: the forbidden ones are the findings', in pod order.
    detail: (v, found) => {
      const sysctls = field(v.podSecurityContext, "sysctls");
      const indexes = [...new Set(found.flatMap((l) => (l.at === "sysctl" ? [l.index] : [])))].sort((a, b) => a - b);
      const list = indexes.map((i) => String(field(Array.isArray(sysctls) && isObject(sysctls[i]) ? sysctls[i] : undefined, "name") ?? ""));
      return list.length === 0 ? undefined : { detail: list.join(", ") };
    },
  },
  windowsHostProcess: {
    level: "baseline",
    reason: "hostProcess",
    detail: (v) => {
      const podBad = field(v.podSecurityContext, "windowsOptions", "hostProcess") === true;
      const bad = v.containers.filter((c) => field(c.securityContext, "windowsOptions", "hostProcess") === true);
      const who = setters(podBad, names(bad));
      return who.length === 0 ? undefined : { detail: `${who.join(" and ")} must not set securityContext.windowsOptions.hostProcess=true` };
    },
  },

  // Restricted.
  allowPrivilegeEscalation: {
    level: "restricted",
    reason: "allowPrivilegeEscalation != false",
    detail: (v) => {
      const bad = v.containers.filter((c) => field(c.securityContext, "allowPrivilegeEscalation") !== false);
      return bad.length === 0 ? undefined : { detail: `${containersPhrase(names(bad))} must set securityContext.allowPrivilegeEscalation=false` };
    },
  },
  capabilities_restricted: {
    level: "restricted",
    reason: "unrestricted capabilities",
    detail: (v) => {
      const missingDropAll: string[] = [];
      const adding: string[] = [];
      const caps = new Set<string>();
      for (const c of v.containers) {
        const capabilities = field(c.securityContext, "capabilities");
        if (!isSet(capabilities)) {
          missingDropAll.push(c.name);
          continue;
        }
        if (!stringList(field(c.securityContext, "capabilities", "drop")).includes("ALL")) missingDropAll.push(c.name);
        const added = stringList(field(c.securityContext, "capabilities", "add")).filter((cap) => cap !== "NET_BIND_SERVICE");
        added.forEach((cap) => caps.add(cap));
        if (added.length > 0) adding.push(c.name);
      }
      const details: string[] = [];
      if (missingDropAll.length > 0) details.push(`${containersPhrase(missingDropAll)} must set securityContext.capabilities.drop=["ALL"]`);
      if (adding.length > 0) details.push(`${containersPhrase(adding)} must not include ${joinQuote(sortedSet(caps))} in securityContext.capabilities.add`);
      return details.length === 0 ? undefined : { detail: details.join("; ") };
    },
  },
  procMount_restricted: { level: "restricted", reason: "procMount", detail: (v) => procMountDetail(v) },
  restrictedVolumes: {
    level: "restricted",
    reason: "restricted volume types",
    detail: (v, found) => {
      const all = volumes(v);
      const indexes = [...new Set(found.flatMap((l) => (l.at === "volume" ? [l.index] : [])))].sort((a, b) => a - b);
      if (indexes.length === 0) return undefined;
      const types = new Set<string>();
      for (const l of found) if (l.at === "volume") types.add(NAMED_VOLUME_TYPES.has(l.rest) ? l.rest : "unknown");
      const vols = indexes.map((i) => volumeName(all[i]));
      const typeList = sortedSet(types);
      return {
        detail: `${pluralize("volume", "volumes", vols.length)} ${joinQuote(vols)} ${pluralize("uses", "use", vols.length)} ${pluralize("restricted volume type", "restricted volume types", typeList.length)} ${joinQuote(typeList)}`,
      };
    },
  },
  runAsNonRoot: {
    level: "restricted",
    reason: "runAsNonRoot != true",
    detail: (v) => {
      const podValue = field(v.podSecurityContext, "runAsNonRoot");
      const explicit: string[] = [];
      const implicit: string[] = [];
      for (const c of v.containers) {
        const own = field(c.securityContext, "runAsNonRoot");
        if (isSet(own)) {
          if (own === false) explicit.push(c.name);
        } else if (podValue !== true) implicit.push(c.name);
      }
      const who = setters(podValue === false, explicit);
      if (who.length > 0) return { detail: `${who.join(" and ")} must not set securityContext.runAsNonRoot=false` };
      if (implicit.length > 0) return { detail: `pod or ${containersPhrase(implicit)} must set securityContext.runAsNonRoot=true` };
      return undefined;
    },
  },
  runAsUser: {
    level: "restricted",
    reason: "runAsUser=0",
    detail: (v) => {
      const podBad = field(v.podSecurityContext, "runAsUser") === 0;
      const bad = v.containers.filter((c) => field(c.securityContext, "runAsUser") === 0);
      const who = setters(podBad, names(bad));
      return who.length === 0 ? undefined : { detail: `${who.join(" and ")} must not set runAsUser=0` };
    },
  },
  seccompProfile_restricted: {
    level: "restricted",
    reason: "seccompProfile",
    detail: (v) => {
      const values = new Set<string>();
      const podProfile = field(v.podSecurityContext, "seccompProfile");
      const podType = String(field(v.podSecurityContext, "seccompProfile", "type") ?? "");
      const podBad = isSet(podProfile) && !SECCOMP_ALLOWED.has(podType);
      if (podBad) values.add(podType);
      const podSet = isSet(podProfile) && !podBad;
      const explicit: string[] = [];
      const implicit: string[] = [];
      for (const c of v.containers) {
        if (isSet(field(c.securityContext, "seccompProfile"))) {
          const t = String(field(c.securityContext, "seccompProfile", "type") ?? "");
          if (!SECCOMP_ALLOWED.has(t)) {
            explicit.push(c.name);
            values.add(t);
          }
        } else if (!podSet) implicit.push(c.name);
      }
      const who = setters(podBad, explicit);
      if (who.length > 0) return { detail: `${who.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(values))}` };
      if (implicit.length > 0)
        return { detail: `pod or ${containersPhrase(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"` };
      return undefined;
    },
  },
};

function names(containers: readonly ContainerView[]): string[] {
  return containers.map((c) => c.name);
}

function volumes(v: PodView): Array<Record<string, unknown>> {
  return (Array.isArray(v.spec.volumes) ? v.spec.volumes : []).map((vol) => (isObject(vol) ? vol : {}));
}

function volumeName(vol: Record<string, unknown> | undefined): string {
  return typeof vol?.name === "string" ? vol.name : "";
}

function procMountDetail(v: PodView): { detail: string } | undefined {
  const types = new Set<string>();
  const bad = v.containers.filter((c) => {
    const pm = field(c.securityContext, "procMount");
    if (!isSet(pm) || pm === "Default") return false;
    types.add(String(pm));
    return true;
  });
  return bad.length === 0 ? undefined : { detail: `${containersPhrase(names(bad))} must not set securityContext.procMount to ${joinQuote(sortedSet(types))}` };
}

/** The PSA check IDs this file words: every check of the shipped baseline and restricted profiles. */
export const WORDED_CHECKS: readonly string[] = Object.keys(WORDING);

/** PSA's check ID for a finding's rule ("baseline/privileged" → privileged; restricted's procMount → procMount_restricted). */
export function psaCheckOf(rule: string): { id: string; level: Level } | undefined {
  const slash = rule.indexOf("/");
  if (slash < 0) return undefined;
  const level = rule.slice(0, slash);
  const name = rule.slice(slash + 1);
  if (level !== "baseline" && level !== "restricted") return undefined;
  if (level === "restricted" && name === "procMount") return { id: "procMount_restricted", level };
  return WORDING[name]?.level === level ? { id: name, level } : undefined;
}

/**
 * The findings of a shipped profile (at any level and version) on one pod, as PSA's check results: one per failed
 * check, in PSA's order, each with PSA's reason and detail. Findings of checks that are not PSA's (none in the
 * shipped profiles) keep their own rule as reason, after PSA's.
 */
export function psaCheckResults(pod: PodUnderReview, findings: readonly Finding[]): PsaCheckResult[] {
  const view = viewOf(pod);
  const byCheck = new Map<string, { level: Level; located: Located[] }>();
  const foreign: string[] = [];
  for (const f of findings) {
    const check = psaCheckOf(f.rule);
    if (!check) {
      if (!foreign.includes(f.rule)) foreign.push(f.rule);
      continue;
    }
    const entry = byCheck.get(check.id) ?? { level: check.level, located: [] };
    entry.located.push(locate(f, pod, view));
    byCheck.set(check.id, entry);
  }
  // PSA's order: the baseline check IDs sorted, then the restricted ones sorted (policy/registry.go).
  const order = [...byCheck.keys()].sort((a, b) => rank(byCheck.get(a)!.level) - rank(byCheck.get(b)!.level) || byteOrder(a, b));
  const results: PsaCheckResult[] = order.map((id) => {
    const wording = WORDING[id]!;
    const said = wording.detail(view, byCheck.get(id)!.located);
    return { check: id === "procMount_restricted" ? "procMount" : id, reason: said?.reason ?? wording.reason, detail: said?.detail ?? "" };
  });
  for (const rule of foreign) results.push({ check: rule, reason: rule, detail: "" });
  return results;
}

function rank(level: Level): number {
  return level === "baseline" ? 0 : 1;
}
