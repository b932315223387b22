// The loader of each policy and configuration kind, called on one parsed document as the tests that check
// documents (the docs' examples, the shipped files) need it: what the loader says against the document.
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadRegistriesFile } from "../../src/config/registries-file.ts";
import { loadServerConfig } from "../../src/config/server-config.ts";
import { readPolicyTests } from "../../src/cli/policy-test.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { profileSources, shippedProfiles } from "../../src/policy/profiles.ts";
import { loadCallerTokens } from "../../src/caller-auth/caller-tokens.ts";

const POLICY_KINDS = ["ImagePolicy", "PodRestriction", "TrustRoot", "NamespacedImagePolicy", "NamespacedPodRestriction", "PolicyException"];
const FILE_LOADERS: Record<string, (file: string) => Promise<unknown>> = {
  PolicyTest: readPolicyTests,
  ServerConfig: loadServerConfig,
  RegistryConfig: loadRegistriesFile,
  CallerTokens: loadCallerTokens,
};

let written = 0;

/**
 * The problems the loader of `doc`'s kind finds in it ([] when it accepts it), or undefined when no loader
 * takes the kind. The document is read as if it stood in `originDir` (the files it names); the kinds loaded
 * from a file are written to `scratch` first as JSON (JSON is YAML), a PolicyTest with its paths made absolute
 * from `originDir`.
 */
export async function kindLoaderProblems(doc: Record<string, unknown>, originDir: string, scratch: string): Promise<string[] | undefined> {
  const kind = String(doc.kind);
  if (POLICY_KINDS.includes(kind)) {
    const profiles = profileSources(await shippedProfiles());
    // A missing file throws, which the loader reports.
    const related = (p: string) => readFileSync(join(originDir, p), "utf8");
    const { errors } = parsePolicyText(JSON.stringify(doc), join(originDir, "doc.yaml"), { profiles, related });
    return errors.map((e) => `${e.path ?? ""}: ${e.message}`);
  }
  const load = FILE_LOADERS[kind];
  if (!load) return undefined;
  const file = join(scratch, `${kind}-${++written}.yaml`);
  await writeFile(file, JSON.stringify(kind === "PolicyTest" ? withPathsFrom(originDir, doc) : doc));
  try {
    await load(file);
    return [];
  } catch (e) {
    if (e instanceof ConfigError) return [e.message];
    throw e;
  }
}

function withPathsFrom(dir: string, doc: Record<string, unknown>): Record<string, unknown> {
  const at = (p: unknown) => (typeof p === "string" && p !== "" ? resolve(dir, p) : p);
  const out = { ...doc };
  for (const key of ["config", "namespaces"]) if (key in out) out[key] = at(out[key]);
  for (const key of ["policies", "resources"]) if (Array.isArray(out[key])) out[key] = (out[key] as unknown[]).map(at);
  return out;
}
