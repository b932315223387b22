// Pod Security Admission's own configuration, PodSecurityConfiguration, so that a cluster's existing file works
// unchanged: the defaults for namespaces without labels and the exemptions (k8s.io/pod-security-admission
// admission/api: v1, v1beta1 and v1alpha1 have the same fields; defaults.go: an unset level is privileged, an
// unset version latest; validation/validation.go: what is refused).
//
// Two forms are read:
// - the PodSecurityConfiguration document itself (apiVersion pod-security.admission.config.k8s.io/v1, v1beta1 or
//   v1alpha1);
// - kube-apiserver's AdmissionConfiguration (apiserver.config.k8s.io/v1, apiserver.k8s.io/v1alpha1) with the
//   PodSecurity plugin's configuration embedded (`plugins[].name: PodSecurity`, `configuration:`). A plugin that
//   points to a file (`path:`) is refused: point Imprimatur at that file instead.
// Unlike PSA, unknown fields are refused (a misspelt "exemption" would otherwise exempt nothing, silently).
import { isObject } from "../primitives/json-shapes.ts";
import { didYouMean } from "../primitives/unknown-field.ts";
import {
  LATEST,
  LEVEL_ERROR,
  parseLevel,
  parseVersion,
  POD_SECURITY_MODES,
  PRIVILEGED_POLICY,
  VERSION_ERROR,
  type PodSecurityMode,
  type PodSecurityPolicy,
} from "./psa-labels.ts";

export const PSA_CONFIG_API_VERSIONS: readonly string[] = [
  "pod-security.admission.config.k8s.io/v1",
  "pod-security.admission.config.k8s.io/v1beta1",
  "pod-security.admission.config.k8s.io/v1alpha1",
];
export const ADMISSION_CONFIG_API_VERSIONS: readonly string[] = ["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"];

export interface PodSecurityExemptions {
  usernames: readonly string[];
  namespaces: readonly string[];
  runtimeClasses: readonly string[];
}

export interface PodSecurityConfig {
  /** The policy of a namespace without pod-security.kubernetes.io labels (and of each label it lacks). */
  defaults: PodSecurityPolicy;
  exemptions: PodSecurityExemptions;
}

/** PSA without a configuration file: every mode privileged at latest, nothing exempt. */
export const DEFAULT_POD_SECURITY_CONFIG: PodSecurityConfig = {
  defaults: PRIVILEGED_POLICY,
  exemptions: { usernames: [], namespaces: [], runtimeClasses: [] },
};

/** A field path in the document: ["exemptions", "namespaces", 0]. */
export type FieldPath = ReadonlyArray<string | number>;

export interface ConfigIssue {
  path: FieldPath;
  message: string;
}

const DEFAULT_FIELDS = ["enforce", "enforce-version", "audit", "audit-version", "warn", "warn-version"];
const EXEMPTION_FIELDS = ["usernames", "namespaces", "runtimeClasses"] as const;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A PodSecurityConfiguration, or an AdmissionConfiguration embedding one; every problem with its field path. */
export function parsePodSecurityConfiguration(document: unknown): { config?: PodSecurityConfig; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  if (!isObject(document)) return { issues: [{ path: [], message: "must be a PodSecurityConfiguration or an AdmissionConfiguration (a YAML mapping)" }] };
  if (document.kind === "AdmissionConfiguration") {
    const config = fromAdmissionConfiguration(document, issues);
    return issues.length > 0 || !config ? { issues } : { config, issues };
  }
  const config = fromPodSecurityConfiguration(document, [], issues);
  return issues.length > 0 ? { issues } : { config, issues };
}

function fromAdmissionConfiguration(doc: Record<string, unknown>, issues: ConfigIssue[]): PodSecurityConfig | undefined {
  if (typeof doc.apiVersion !== "string" || !ADMISSION_CONFIG_API_VERSIONS.includes(doc.apiVersion))
    issues.push({ path: ["apiVersion"], message: `must be one of ${ADMISSION_CONFIG_API_VERSIONS.join(", ")} for an AdmissionConfiguration` });
  unknownFields(doc, [], ["apiVersion", "kind", "plugins"], issues);
  if (!Array.isArray(doc.plugins)) {
    issues.push({ path: ["plugins"], message: "must be a list of plugins, one of them named PodSecurity" });
    return undefined;
  }
  const found = doc.plugins.flatMap((p, i) => (isObject(p) && p.name === "PodSecurity" ? [{ plugin: p, i }] : []));
  if (found.length === 0) {
    issues.push({ path: ["plugins"], message: "has no plugin named PodSecurity" });
    return undefined;
  }
  if (found.length > 1) {
    issues.push({ path: ["plugins", found[1]!.i, "name"], message: "PodSecurity is configured twice" });
    return undefined;
  }
  const { plugin, i } = found[0]!;
  const at: FieldPath = ["plugins", i];
  unknownFields(plugin, at, ["name", "path", "configuration"], issues);
  if (plugin.path !== undefined) {
    issues.push({ path: [...at, "path"], message: "a configuration in another file is not read from here; give that file itself, or embed the configuration" });
    return undefined;
  }
  if (!isObject(plugin.configuration)) {
    issues.push({ path: [...at, "configuration"], message: "must be the PodSecurityConfiguration" });
    return undefined;
  }
  return fromPodSecurityConfiguration(plugin.configuration, [...at, "configuration"], issues);
}

function fromPodSecurityConfiguration(doc: Record<string, unknown>, at: FieldPath, issues: ConfigIssue[]): PodSecurityConfig {
  if (typeof doc.apiVersion !== "string" || !PSA_CONFIG_API_VERSIONS.includes(doc.apiVersion))
    issues.push({ path: [...at, "apiVersion"], message: `must be one of ${PSA_CONFIG_API_VERSIONS.join(", ")}` });
  if (doc.kind !== "PodSecurityConfiguration") issues.push({ path: [...at, "kind"], message: 'must be "PodSecurityConfiguration"' });
  unknownFields(doc, at, ["apiVersion", "kind", "defaults", "exemptions"], issues);
  return { defaults: readDefaults(doc.defaults, [...at, "defaults"], issues), exemptions: readExemptions(doc.exemptions, [...at, "exemptions"], issues) };
}

function readDefaults(raw: unknown, at: FieldPath, issues: ConfigIssue[]): PodSecurityPolicy {
  const policy: PodSecurityPolicy = {
    enforce: { level: "privileged", version: LATEST },
    audit: { level: "privileged", version: LATEST },
    warn: { level: "privileged", version: LATEST },
  };
  if (raw === undefined || raw === null) return policy;
  if (!isObject(raw)) {
    issues.push({ path: at, message: "must be a mapping of enforce, enforce-version, audit, audit-version, warn, warn-version" });
    return policy;
  }
  unknownFields(raw, at, DEFAULT_FIELDS, issues);
  for (const mode of POD_SECURITY_MODES) {
    readLevel(raw[mode], [...at, mode], mode, policy, issues);
    const versionKey = `${mode}-version`;
    const text = raw[versionKey];
    // As PSA's defaulting: an empty or absent value is latest.
    if (text === undefined || text === null || text === "") continue;
    const version = typeof text === "string" ? parseVersion(text) : undefined;
    if (version) policy[mode].version = version;
    else issues.push({ path: [...at, versionKey], message: `${VERSION_ERROR}, got ${JSON.stringify(text)}` });
  }
  return policy;
}

function readLevel(text: unknown, path: FieldPath, mode: PodSecurityMode, policy: PodSecurityPolicy, issues: ConfigIssue[]): void {
  // As PSA's defaulting: an empty or absent level is privileged.
  if (text === undefined || text === null || text === "") return;
  const level = typeof text === "string" ? parseLevel(text) : undefined;
  if (level) policy[mode].level = level;
  else issues.push({ path, message: `${LEVEL_ERROR}, got ${JSON.stringify(text)}` });
}

function readExemptions(raw: unknown, at: FieldPath, issues: ConfigIssue[]): PodSecurityExemptions {
  const out = { usernames: [] as string[], namespaces: [] as string[], runtimeClasses: [] as string[] };
  if (raw === undefined || raw === null) return out;
  if (!isObject(raw)) {
    issues.push({ path: at, message: "must be a mapping of usernames, namespaces, runtimeClasses" });
    return out;
  }
  unknownFields(raw, at, EXEMPTION_FIELDS, issues);
  for (const key of EXEMPTION_FIELDS) {
    const list = raw[key];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) {
      issues.push({ path: [...at, key], message: "must be a list of names" });
      continue;
    }
    const seen = new Set<string>();
    list.forEach((item, i) => {
      const path = [...at, key, i];
      const problem = exemptionProblem(key, item);
      if (problem) return void issues.push({ path, message: problem });
      const name = item as string;
      if (seen.has(name)) return void issues.push({ path, message: `duplicate ${JSON.stringify(name)}` });
      seen.add(name);
      out[key].push(name);
    });
  }
  return out;
}

/** validation.go: namespaces are DNS labels, runtime classes DNS subdomains, usernames not empty. */
function exemptionProblem(key: (typeof EXEMPTION_FIELDS)[number], item: unknown): string | undefined {
  if (typeof item !== "string" || item === "") return "must be a non-empty string";
  if (key === "namespaces" && (item.length > 63 || !DNS_LABEL.test(item)))
    return `must be a namespace name (lowercase letters, digits and '-', at most 63 characters), got ${JSON.stringify(item)}`;
  if (key === "runtimeClasses" && (item.length > 253 || !DNS_SUBDOMAIN.test(item)))
    return `must be a RuntimeClass name (a lowercase DNS subdomain, at most 253 characters), got ${JSON.stringify(item)}`;
  return undefined;
}

function unknownFields(obj: Record<string, unknown>, at: FieldPath, known: readonly string[], issues: ConfigIssue[]): void {
  for (const key of Object.keys(obj)) if (!known.includes(key)) issues.push({ path: [...at, key], message: `unknown field${didYouMean(key, known)}` });
}
