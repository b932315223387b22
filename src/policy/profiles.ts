// The shipped PodRestriction profiles (Pod Security Standards baseline and restricted), kept as ordinary
// PodRestriction documents in policies/profiles/. A policy includes one with `spec.profile: NAME`;
// `--profile NAME` binds one cluster-wide without writing a policy.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readKubeYaml } from "../config/kube-yaml.ts";
import { compilePodRestriction, type PodRestriction } from "../core/pod-restriction/pod-restriction.ts";
import { formatPath, PolicyLoadError, type PolicyError } from "./policy-error.ts";

export const PROFILES_DIR = fileURLToPath(new URL("../../policies/profiles/", import.meta.url));

export interface Profile {
  name: string;
  description: string;
  file: string;
  raw: unknown;
  /** The profile compiled as its file says (with its opt-in binding); its checks and included profiles are what is used: `spec.profile` and `--profile` ignore its binding. */
  policy: PodRestriction;
}

let shipped: Promise<Map<string, Profile>> | undefined;

/** The shipped profiles, read once per process. Throws PolicyLoadError if one is broken. */
export function shippedProfiles(): Promise<Map<string, Profile>> {
  shipped ??= loadProfiles(PROFILES_DIR);
  return shipped;
}

async function loadProfiles(dir: string): Promise<Map<string, Profile>> {
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
    profiles.set(name, { name, description: compiled.policy.description ?? "", file, raw, policy: compiled.policy });
  }
  if (errors.length > 0) throw new PolicyLoadError(errors);
  return profiles;
}

export function profileSources(profiles: ReadonlyMap<string, Profile>): Map<string, unknown> {
  return new Map([...profiles].map(([name, p]) => [name, p.raw]));
}

/** A cluster-wide Drop PodRestriction that is exactly the named profile (for --profile). */
export function bindProfileClusterWide(name: string, profiles: ReadonlyMap<string, Profile>): PodRestriction {
  const compiled = compilePodRestriction(
    { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: `profile-${name}` }, spec: { profile: name } },
    { profiles: profileSources(profiles) },
  );
  if (!compiled.policy) {
    const known = [...profiles.keys()].join(", ");
    throw new PolicyLoadError([{ origin: "--profile", message: `unknown profile ${JSON.stringify(name)}; shipped profiles: ${known}` }]);
  }
  return compiled.policy;
}
