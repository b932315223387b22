// `imprimatur check`: evaluates manifests offline through the same engine as the webhooks, for CI pipelines.
// Exit 0 when every object checked is allowed, 1 when any is denied, 2 on usage, manifest or policy-load
// errors, and when no object could be checked at all.
import { errorText, parseCommandArgs, UsageError } from "./args.ts";
import { renderJson, renderJunit, renderText, renderYaml, summarize } from "./check-report.ts";
import { checkManifests, offlineChecker, type OfflineChecker } from "./offline-engine.ts";

export const CHECK_USAGE = `Usage: imprimatur check [--policies DIR] [--profile NAME] -f FILE|DIR|- [-f …] [options]

Evaluates Pods and the pod templates of workloads (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob, ReplicationController, PodTemplate), of custom resources registered in --config, and the images
that ImagePolicy imagePaths locate in custom resources, against the ImagePolicies and PodRestrictions of the
policy folder — the same decision /validate makes. Objects without a namespace are checked as "default".
Other objects are listed as skipped, with the reason.

  -f, --filename PATH  manifest file, folder (recursively) or - for standard input (repeatable)
  --policies DIR       policy folder or file (default: the embedded default policy, unless --profile is
                       given, which then is judged alone)
  --profile NAME       bind a shipped PodRestriction profile (baseline, restricted) to every namespace
                       (repeatable; see "imprimatur profiles")
  --config FILE        ServerConfig: its podTemplates (custom resources) and namespacesFile are used
  --namespaces FILE    namespace labels for namespaceSelector bindings (map or Namespace list)
  --strict             unknown fields in Pods and pod templates are errors (default: warnings)
  -o, --output FORMAT  text (default: one line per finding and a summary), json, yaml or junit
  -h, --help           show this help

Offline: remote ImageReview backends and registries are not asked, tags are not resolved, and signatures are
not verified (each image that needs them gets a warning; "imprimatur verify" verifies them). Objects are
checked as written: the defaults kube-apiserver would add are not applied.
Exit code: 0 all allowed, 1 some denied, 2 usage, manifest or policy errors, or nothing to check.
`;

const OUTPUTS = ["text", "json", "yaml", "junit"] as const;
type Output = (typeof OUTPUTS)[number];

export async function runCheck(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseCommandArgs(argv, {
      policies: { type: "string" },
      filename: { type: "string", short: "f", multiple: true, default: [] },
      output: { type: "string", short: "o", default: "text" },
      namespaces: { type: "string" },
      profile: { type: "string", multiple: true, default: [] },
      config: { type: "string" },
      strict: { type: "boolean", default: false },
    }));
    if (values.filename!.length === 0) throw new UsageError("at least one -f FILE|DIR|- is required");
    if (!OUTPUTS.includes(values.output as Output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`imprimatur check: ${e.message}\n\n${CHECK_USAGE}`);
      return 2;
    }
    throw e;
  }

  let checker: OfflineChecker;
  try {
    checker = await offlineChecker({
      policies: values.policies === undefined ? undefined : [values.policies],
      profiles: values.profile!,
      config: values.config,
      namespaces: values.namespaces,
    });
  } catch (e) {
    process.stderr.write(`imprimatur check: ${errorText(e)}\n`);
    return 2;
  }

  const problems: string[] = [];
  const results = await checkManifests(checker, values.filename!, values.strict!, problems);
  await checker.engine.close();

  const output = values.output as Output;
  for (const p of problems) process.stderr.write(`imprimatur check: ${p}\n`);
  process.stdout.write(
    output === "json"
      ? renderJson(results, problems)
      : output === "yaml"
        ? renderYaml(results, problems)
        : output === "junit"
          ? renderJunit(results, problems)
          : renderText(results),
  );
  const s = summarize(results);
  if (s.allowed + s.denied === 0 && problems.length === 0 && s.errors === 0) {
    process.stderr.write(`imprimatur check: no object was checked (${s.skipped} skipped): nothing in the manifests runs pods\n`);
    return 2;
  }
  if (problems.length > 0 || s.errors > 0) return 2;
  return s.denied > 0 ? 1 : 0;
}
