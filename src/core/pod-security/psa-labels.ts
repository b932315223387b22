// Pod Security Admission's namespace labels: pod-security.kubernetes.io/{enforce,audit,warn} and their -version
// labels, read as PSA reads them (k8s.io/pod-security-admission api/helpers.go, PolicyToEvaluate, ParseLevel and
// ParseVersion), falling back to the defaults (PodSecurityConfiguration) for a label that is not set.
//
// What PSA does with a value it cannot parse, and so what this does:
// - enforce level: "restricted" (fails closed), with an error;
// - audit and warn level: "privileged" (fails open), with an error;
// - any -version: "latest", with an error.
// The errors do not stop the evaluation: they go to the audit annotation `error` ("Failed to parse policy: …"),
// and a namespace create or update that brings them is refused.
// A version newer than the newest one the checks know is kept as written (messages print it) and evaluated as the
// newest, as PSA's evaluator does.

export type PodSecurityLevel = "privileged" | "baseline" | "restricted";
export const POD_SECURITY_LEVELS: readonly PodSecurityLevel[] = ["privileged", "baseline", "restricted"];

/** A policy version as the labels write it: "latest" or v1.MINOR (`minor` may be beyond the newest known). */
export type PodSecurityVersion = { latest: true } | { latest: false; minor: number; digits?: string };
export const LATEST: PodSecurityVersion = { latest: true };

export interface LevelVersion {
  level: PodSecurityLevel;
  version: PodSecurityVersion;
}

export type PodSecurityMode = "enforce" | "audit" | "warn";
export const POD_SECURITY_MODES: readonly PodSecurityMode[] = ["enforce", "audit", "warn"];

/** The three modes' level and version for a namespace. */
export type PodSecurityPolicy = Record<PodSecurityMode, LevelVersion>;

export const LABEL_PREFIX = "pod-security.kubernetes.io/";

export function levelLabel(mode: PodSecurityMode): string {
  return `${LABEL_PREFIX}${mode}`;
}
export function versionLabel(mode: PodSecurityMode): string {
  return `${LABEL_PREFIX}${mode}-version`;
}

/** PSA's defaults when no PodSecurityConfiguration says otherwise: every mode privileged, latest. */
export const PRIVILEGED_POLICY: PodSecurityPolicy = {
  enforce: { level: "privileged", version: LATEST },
  audit: { level: "privileged", version: LATEST },
  warn: { level: "privileged", version: LATEST },
};

/** One label PSA refuses: the label, its value, and PSA's reason. */
export interface LabelError {
  label: string;
  value: string;
  message: string;
}

export const LEVEL_ERROR = "must be one of privileged, baseline, restricted";
export const VERSION_ERROR = 'must be "latest" or "v1.x"';

/** ParseLevel: one of the three levels, else undefined (the caller picks PSA's fallback). */
export function parseLevel(text: string): PodSecurityLevel | undefined {
  return POD_SECURITY_LEVELS.find((l) => l === text);
}

// Go's strconv.Atoi takes up to the largest int64; a longer minor fails to parse and PSA uses latest.
const MAX_INT64 = "9223372036854775807";

/** ParseVersion: "latest", or "v1." and a minor without leading zeros that fits an int64; else undefined. */
export function parseVersion(text: string): PodSecurityVersion | undefined {
  if (text === "latest") return LATEST;
  const m = /^v1\.([0-9]|[1-9][0-9]*)$/.exec(text);
  if (!m) return undefined;
  const digits = m[1]!;
  if (digits.length > MAX_INT64.length || (digits.length === MAX_INT64.length && digits > MAX_INT64)) return undefined;
  // Beyond 2^53 the number is not exact: such a version is evaluated as the newest and printed from its digits.
  const minor = Number(digits);
  return Number.isSafeInteger(minor) ? { latest: false, minor } : { latest: false, minor, digits };
}

/** "latest" or "v1.25", as PSA's Version.String() prints it. */
export function formatVersion(v: PodSecurityVersion): string {
  return v.latest ? "latest" : `v1.${v.digits ?? v.minor}`;
}

/** "restricted:latest", as PSA's LevelVersion.String() prints it. */
export function formatLevelVersion(lv: LevelVersion): string {
  return `${lv.level}:${formatVersion(lv.version)}`;
}

export function sameLevelVersion(a: LevelVersion, b: LevelVersion): boolean {
  return a.level === b.level && formatVersion(a.version) === formatVersion(b.version);
}

/** PSA's CompareLevels: -1 when a is less strict than b, 0 when equal, 1 when stricter. */
export function compareLevels(a: PodSecurityLevel, b: PodSecurityLevel): number {
  return Math.sign(POD_SECURITY_LEVELS.indexOf(a) - POD_SECURITY_LEVELS.indexOf(b));
}

/**
 * The policy of a namespace with these labels: PSA's PolicyToEvaluate. A policy is always returned; errors list
 * the labels it could not parse (in PSA's order: enforce, enforce-version, audit, audit-version, warn, warn-version).
 */
export function policyOfLabels(
  labels: Readonly<Record<string, string>> | undefined,
  defaults: PodSecurityPolicy = PRIVILEGED_POLICY,
): { policy: PodSecurityPolicy; errors: LabelError[] } {
  const policy: PodSecurityPolicy = { enforce: { ...defaults.enforce }, audit: { ...defaults.audit }, warn: { ...defaults.warn } };
  const errors: LabelError[] = [];
  if (!labels) return { policy, errors };
  for (const mode of POD_SECURITY_MODES) {
    const levelText = ownString(labels, levelLabel(mode));
    if (levelText !== undefined) {
      const level = parseLevel(levelText);
      if (level) policy[mode].level = level;
      else {
        // Enforce fails closed; audit and warn fail open.
        policy[mode].level = mode === "enforce" ? "restricted" : "privileged";
        errors.push({ label: levelLabel(mode), value: levelText, message: LEVEL_ERROR });
      }
    }
    const versionText = ownString(labels, versionLabel(mode));
    if (versionText !== undefined) {
      const version = parseVersion(versionText);
      policy[mode].version = version ?? LATEST;
      if (!version) errors.push({ label: versionLabel(mode), value: versionText, message: VERSION_ERROR });
    }
  }
  return { policy, errors };
}

function ownString(labels: Readonly<Record<string, string>>, key: string): string | undefined {
  return Object.hasOwn(labels, key) ? String(labels[key]) : undefined;
}

/** One error as Kubernetes' field.Error prints it: `metadata.labels[KEY]: Invalid value: "v": reason`. */
export function renderLabelError(e: LabelError): string {
  return `metadata.labels[${e.label}]: Invalid value: ${goQuote(e.value)}: ${e.message}`;
}

/** The errors as an aggregate error prints them: one alone, several in brackets, duplicates once. */
export function renderLabelErrors(errors: readonly LabelError[]): string {
  const messages = [...new Set(errors.map(renderLabelError))];
  return messages.length === 1 ? messages[0]! : `[${messages.join(", ")}]`;
}

/** Go's %q for the strings these messages quote: backslash escapes, control characters as \xNN. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}
