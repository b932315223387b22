// The shipped PodRestriction profiles (Pod Security Standards baseline and restricted), kept as ordinary
// PodRestriction documents in policies/profiles/. A policy includes one with `spec.profile: NAME`;
// `--profile NAME` binds one cluster-wide without writing a policy.
//
// Each profile is written as the newest policy version (v1.37, "latest"). Its earlier versions come from the table
// in its `imprimatur.dev/policy-versions` annotation, which lists, as Pod Security Admission's VersionedCheck lists
// do, the versions at which each check changed: `restricted@v1.25` is the profile with, for every check, the variant
// in force at v1.25 (and without the checks that came later). One resolver reads these names for `spec.profile`,
// `--profile` and `imprimatur profiles`.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readKubeYaml } from "../config/kube-yaml.ts";
import { isObject } from "../core/primitives/json-shapes.ts";
import {
  compilePodRestriction,
  DESCRIPTION_ANNOTATION,
  type PodRestriction,
  type ProfileCatalog,
  type ProfileLookup,
} from "../core/pod-restriction/pod-restriction.ts";
import { formatPath, PolicyLoadError, type PolicyError } from "./policy-error.ts";

export const PROFILES_DIR = fileURLToPath(new URL("../../policies/profiles/", import.meta.url));

/** The Kubernetes minor version the profile files are written for: `latest`, and the newest version one may name. */
export const NEWEST_POLICY_MINOR = 37;
export const VERSIONS_ANNOTATION = "imprimatur.dev/policy-versions";

/** A policy version as Pod Security Admission's `-version` labels write it: `latest`, or `v1.MINOR`. */
export type PolicyVersion = number | "latest";

/** One variant of a check: in force from `from` up to the next variant's `from`. */
export interface CheckVariant {
  from: number;
  /** Fields that replace the written check's (null removes one); empty for the check as written. */
  replaces: Record<string, unknown>;
}

export interface Profile {
  name: string;
  description: string;
  file: string;
  raw: unknown;
  /** The profile compiled as its file says (with its opt-in binding); its checks and included profiles are what is used: `spec.profile` and `--profile` ignore its binding. */
  policy: PodRestriction;
  /** The version table: check name → its variants, oldest first. A check not in it is the same in every version. */
  versions: ReadonlyMap<string, readonly CheckVariant[]>;
}

let shipped: Promise<Map<string, Profile>> | undefined;

/** The shipped profiles, read once per process. Throws PolicyLoadError if one is broken. */
export function shippedProfiles(): Promise<Map<string, Profile>> {
  shipped ??= loadProfiles(PROFILES_DIR);
  return shipped;
}

/** The profiles in `dir` (the shipped ones are read from PROFILES_DIR once, by shippedProfiles). Throws PolicyLoadError. */
export async function loadProfiles(dir: string): Promise<Map<string, Profile>> {
  const files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f)).sort();
  const raws = new Map<string, { raw: unknown; file: string }>();
  for (const f of files) {
    // Read as every policy file is, as kubectl reads it; a profile is one document.
    const parsed = readKubeYaml(await readFile(join(dir, f), "utf8"));
    const yamlError = parsed.errors[0];
    if (yamlError)
      throw new PolicyLoadError([{ origin: f, ...(yamlError.line !== undefined ? { line: yamlError.line } : {}), message: `YAML: ${yamlError.message}` }]);
    const raw: unknown = parsed.documents[0]?.value ?? null;
    const name = (raw as { metadata?: { name?: unknown } } | null)?.metadata?.name;
    if (typeof name !== "string") throw new PolicyLoadError([{ origin: f, message: "a profile needs metadata.name" }]);
    raws.set(name, { raw, file: f });
  }
  const rawByName = new Map([...raws].map(([n, r]) => [n, r.raw]));
  const profiles = new Map<string, Profile>();
  const errors: PolicyError[] = [];
  for (const [name, { raw, file }] of raws) {
    const compiled = compilePodRestriction(raw, { profiles: rawByName, labelPrefix: `${name}/`, including: [name] });
    if (!compiled.policy) {
      for (const i of compiled.issues) errors.push({ origin: file, path: formatPath(i.path), message: i.message });
      continue;
    }
    const versions = readVersionTable(raw, name, file, errors);
    profiles.set(name, { name, description: compiled.policy.description ?? "", file, raw, policy: compiled.policy, versions });
  }
  if (errors.length > 0) throw new PolicyLoadError(errors);
  return profiles;
}

const VARIANT_FIELDS = ["description", "overrides", "when", "unless", "metadata", "spec"];

/** The profile's version table (its annotation), checked: known checks, valid versions in order, the last one as written. */
function readVersionTable(raw: unknown, name: string, file: string, errors: PolicyError[]): Map<string, CheckVariant[]> {
  const table = new Map<string, CheckVariant[]>();
  const text = (raw as { metadata?: { annotations?: Record<string, unknown> } }).metadata?.annotations?.[VERSIONS_ANNOTATION];
  if (text === undefined) return table;
  const where = `metadata.annotations[${VERSIONS_ANNOTATION}]`;
  const fail = (message: string): Map<string, CheckVariant[]> => {
    errors.push({ origin: file, path: where, message });
    return table;
  };
  if (typeof text !== "string") return fail("must be the version table as YAML text");
  const parsed = readKubeYaml(text);
  if (parsed.errors[0]) return fail(`YAML${parsed.errors[0].line !== undefined ? ` line ${parsed.errors[0].line}` : ""}: ${parsed.errors[0].message}`);
  const doc = parsed.documents[0]?.value;
  if (!isObject(doc)) return fail("must map check names to their versions");
  const checks = (raw as { spec?: { checks?: Array<{ name?: unknown }> } }).spec?.checks ?? [];
  const checkNames = new Set(checks.map((c) => c.name));
  for (const [check, entries] of Object.entries(doc)) {
    if (!checkNames.has(check)) return fail(`${check}: not a check of profile ${JSON.stringify(name)}`);
    if (!Array.isArray(entries) || entries.length === 0) return fail(`${check}: must be a list of the versions it changed at`);
    const variants: CheckVariant[] = [];
    for (const [i, entry] of entries.entries()) {
      if (!isObject(entry)) return fail(`${check}[${i}]: must be a mapping with "from"`);
      const from = typeof entry.from === "string" ? parsePolicyVersion(entry.from) : undefined;
      if (typeof from !== "number" || from > NEWEST_POLICY_MINOR)
        return fail(`${check}[${i}].from: must be a version from v1.0 to v1.${NEWEST_POLICY_MINOR}, got ${JSON.stringify(entry.from)}`);
      if (variants.length > 0 && from <= variants.at(-1)!.from) return fail(`${check}[${i}].from: versions must grow, oldest first`);
      const replaces = Object.fromEntries(Object.entries(entry).filter(([k]) => k !== "from"));
      const unknown = Object.keys(replaces).find((k) => !VARIANT_FIELDS.includes(k));
      if (unknown !== undefined) return fail(`${check}[${i}]: unknown field ${JSON.stringify(unknown)}; a variant may replace ${VARIANT_FIELDS.join(", ")}`);
      variants.push({ from, replaces });
    }
    if (Object.keys(variants.at(-1)!.replaces).length > 0) return fail(`${check}: the last version is the check as written, so it replaces no field`);
    table.set(check, variants);
  }
  return table;
}

/**
 * A policy version as Pod Security Admission's label parser reads it: "latest", or "v1." and a minor version
 * without leading zeros. Anything else (1.25, v0.9, v2.0, v1.025) is undefined. Versions newer than the profiles
 * know are returned as they are: PSA treats them as its newest, `resolveProfileName` refuses them.
 */
export function parsePolicyVersion(text: string): PolicyVersion | undefined {
  if (text === "latest") return "latest";
  const m = /^v1\.(0|[1-9][0-9]*)$/.exec(text);
  if (!m) return undefined;
  const minor = Number(m[1]);
  return Number.isSafeInteger(minor) ? minor : undefined;
}

export type ProfileResolution = { ok: true; profile: Profile; version: PolicyVersion; raw: unknown } | { ok: false; message: string };

/**
 * `baseline`, `restricted@v1.25`, `restricted@latest` → the profile and its document at that version (the file
 * itself for `latest` and a plain name). Unknown names and versions are a message naming what is valid.
 */
export function resolveProfileName(name: string, profiles: ReadonlyMap<string, Profile>): ProfileResolution {
  const at = name.indexOf("@");
  const base = at < 0 ? name : name.slice(0, at);
  const profile = profiles.get(base);
  if (!profile) return { ok: false, message: `unknown profile ${JSON.stringify(name)}; shipped profiles: ${[...profiles.keys()].join(", ") || "none"}` };
  if (at < 0) return { ok: true, profile, version: "latest", raw: profile.raw };
  const versionText = name.slice(at + 1);
  const version = parsePolicyVersion(versionText);
  const range = `v1.0 to v1.${NEWEST_POLICY_MINOR}, or latest (= v1.${NEWEST_POLICY_MINOR})`;
  if (version === undefined)
    return {
      ok: false,
      message: `profile ${JSON.stringify(name)}: the policy version must be written as Pod Security Admission's labels write it, ${range}; got ${JSON.stringify(versionText)}`,
    };
  if (version !== "latest" && version > NEWEST_POLICY_MINOR)
    return { ok: false, message: `profile ${JSON.stringify(name)}: policy version v1.${version} is newer than the shipped profiles, which know ${range}` };
  return { ok: true, profile, version, raw: version === "latest" ? profile.raw : profileDocumentAt(profile, version) };
}

/** The profile's PodRestriction document at policy version v1.`minor`: each check as in force then, its included profile at the same version. */
export function profileDocumentAt(profile: Profile, minor: number): unknown {
  const doc = structuredClone(profile.raw) as {
    metadata: { annotations?: Record<string, unknown> };
    spec?: { profile?: unknown; checks?: Array<Record<string, unknown>> };
  };
  const annotations = doc.metadata.annotations;
  if (annotations) {
    delete annotations[VERSIONS_ANNOTATION];
    const description = annotations[DESCRIPTION_ANNOTATION];
    if (typeof description === "string") annotations[DESCRIPTION_ANNOTATION] = description.replace(/\(Kubernetes v1\.\d+\)/, `(policy version v1.${minor})`);
  }
  if (!doc.spec) return doc;
  if (typeof doc.spec.profile === "string") doc.spec.profile = `${doc.spec.profile}@v1.${minor}`;
  if (Array.isArray(doc.spec.checks)) {
    doc.spec.checks = doc.spec.checks.flatMap((check) => {
      const variants = profile.versions.get(String(check.name));
      if (!variants) return [check];
      const inForce = variants.filter((v) => v.from <= minor).at(-1);
      if (!inForce) return [];
      const variant = { ...check };
      for (const [field, value] of Object.entries(inForce.replaces)) {
        if (value === null) delete variant[field];
        else variant[field] = value;
      }
      return [variant];
    });
  }
  return doc;
}

/** The policy versions one may name, newest last: v1.0 … v1.37. */
export function policyMinors(): number[] {
  return Array.from({ length: NEWEST_POLICY_MINOR + 1 }, (_, minor) => minor);
}

/** The shipped profiles as `spec.profile` reads them: by plain name (`get`), and by any versioned name (`resolve`). */
class ShippedProfileCatalog extends Map<string, unknown> implements ProfileCatalog {
  readonly #profiles: ReadonlyMap<string, Profile>;

  constructor(profiles: ReadonlyMap<string, Profile>) {
    super([...profiles].map(([name, p]) => [name, p.raw]));
    this.#profiles = profiles;
  }

  resolve(name: string): ProfileLookup {
    const r = resolveProfileName(name, this.#profiles);
    return r.ok ? { name: r.profile.name, raw: r.raw } : { error: r.message };
  }
}

export function profileSources(profiles: ReadonlyMap<string, Profile>): Map<string, unknown> & ProfileCatalog {
  return new ShippedProfileCatalog(profiles);
}

/** A cluster-wide Drop PodRestriction that is exactly the named profile (for --profile): `restricted`, `restricted@v1.25`. */
export function bindProfileClusterWide(name: string, profiles: ReadonlyMap<string, Profile>): PodRestriction {
  const resolved = resolveProfileName(name, profiles);
  if (!resolved.ok) throw new PolicyLoadError([{ origin: "--profile", message: resolved.message }]);
  const compiled = compilePodRestriction(
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "PodRestriction",
      metadata: { name: `profile-${name.replace("@", "-")}` },
      spec: { profile: name },
    },
    { profiles: profileSources(profiles) },
  );
  if (!compiled.policy) {
    throw new PolicyLoadError(compiled.issues.map((i) => ({ origin: "--profile", message: `${name}: ${i.message}` })));
  }
  return compiled.policy;
}
