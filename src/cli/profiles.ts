// `imprimatur profiles`: the shipped PodRestriction profiles, with their checks; `--output yaml` prints
// a profile's document, to read or to copy into a policy folder as a starting point.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import { bindProfileClusterWide, NEWEST_POLICY_MINOR, PROFILES_DIR, resolveProfileName, shippedProfiles } from "../policy/profiles.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const PROFILES_USAGE = `Usage: imprimatur profiles [NAME] [--output text|yaml]

Lists the shipped PodRestriction profiles (the Pod Security Standards baseline and restricted levels) and
their checks. Use one from a policy with "spec.profile: NAME", or cluster-wide with "serve --profile NAME"
or "check --profile NAME". With NAME and --output yaml, prints that profile's PodRestriction document.
A NAME may carry a Pod Security Standards policy version, as Pod Security Admission's labels write it:
restricted@v1.25 is the restricted profile as Kubernetes v1.25 defines it (v1.0 to v1.${NEWEST_POLICY_MINOR}; plain
restricted and restricted@latest are v1.${NEWEST_POLICY_MINOR}).

  -o, --output text|yaml   text (default): each profile's name, description and checks; yaml: the
                           profile's document, to read or to copy into a policy folder as a starting point
`;

/** The names of the shipped profiles (for shell completion). */
export async function profileNames(): Promise<string[]> {
  return [...(await shippedProfiles()).keys()];
}

export async function runProfiles(argv: string[]): Promise<number> {
  let values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseCommandArgs(argv, { output: { type: "string", short: "o", default: "text" } }, true));
    if (values.output !== "text" && values.output !== "yaml") throw new UsageError(`--output must be text or yaml, got ${values.output}`);
    if (positionals.length > 1) throw new UsageError("give at most one profile name");
    if (values.output === "yaml" && positionals.length === 0) throw new UsageError("--output yaml needs a profile name");
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("profiles", e.message);
    throw e;
  }
  const profiles = await shippedProfiles();
  const wanted = positionals[0];
  const resolved = wanted === undefined ? undefined : resolveProfileName(wanted, profiles);
  if (resolved && !resolved.ok) {
    process.stderr.write(`imprimatur profiles: ${resolved.message}\n`);
    return 2;
  }
  if (values.output === "yaml") {
    // A plain name prints the file as written (with its comments); a versioned one the document at that version.
    if (!wanted!.includes("@")) process.stdout.write(await readFile(join(PROFILES_DIR, resolved!.profile.file), "utf8"));
    else process.stdout.write(`# The ${wanted} profile, generated from ${resolved!.profile.file}.\n${stringify(resolved!.raw, { lineWidth: 0 })}`);
    return 0;
  }
  if (wanted?.includes("@")) {
    const checks = bindProfileClusterWide(wanted, profiles).checks.map((c) => c.name);
    process.stdout.write(
      `${wanted}\t${resolved!.profile.description.replace(/\(Kubernetes v1\.\d+\)/, `(policy version ${wanted.slice(wanted.indexOf("@") + 1)})`)}\n`,
    );
    process.stdout.write(`\tchecks: ${checks.join(", ")}\n`);
    return 0;
  }
  for (const p of profiles.values()) {
    if (wanted !== undefined && p.name !== wanted) continue;
    const checks = p.policy.checks.map((c) => c.name).filter((n): n is string => n !== undefined);
    const own = checks.filter((n) => n.startsWith(`${p.name}/`));
    const included = p.policy.profiles.length ? ` (includes ${p.policy.profiles.join(", ")})` : "";
    process.stdout.write(`${p.name}\t${p.description}${included}\n`);
    process.stdout.write(`\tchecks: ${(wanted ? checks : own).map((n) => (wanted ? n : n.slice(p.name.length + 1))).join(", ")}\n`);
  }
  return 0;
}
