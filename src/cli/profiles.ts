// `imprimatur profiles`: the shipped PodRestriction profiles, with their checks; `--output yaml` prints
// a profile's document, to read or to copy into a policy folder as a starting point.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PROFILES_DIR, shippedProfiles } from "../policy/profiles.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const PROFILES_USAGE = `Usage: imprimatur profiles [NAME] [--output text|yaml]

Lists the shipped PodRestriction profiles (the Pod Security Standards baseline and restricted levels) and
their checks. Use one from a policy with "spec.profile: NAME", or cluster-wide with "serve --profile NAME"
or "check --profile NAME". With NAME and --output yaml, prints that profile's PodRestriction document.

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
  if (wanted !== undefined && !profiles.has(wanted)) {
    process.stderr.write(`imprimatur profiles: unknown profile ${JSON.stringify(wanted)}; shipped profiles: ${[...profiles.keys()].join(", ")}\n`);
    return 2;
  }
  if (values.output === "yaml") {
    process.stdout.write(await readFile(join(PROFILES_DIR, profiles.get(wanted!)!.file), "utf8"));
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
