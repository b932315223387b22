// `imprimatur check`: evaluates manifests offline through the same engine and the same policy set as `serve`
// (src/policy/policy-set.ts), for CI pipelines. Exit 0 when every object checked is allowed (or holds nothing
// Imprimatur reviews), 1 when any is denied or has signatures that cannot be verified offline, 2 on usage,
// manifest or policy-load errors, and when the input holds no object at all.
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { renderJson, renderJunit, renderText, renderYaml, summarize } from "./check-report.ts";
import { podSecurityContext } from "../policy/pod-security-context.ts";
import { impersonatedUser } from "./impersonation.ts";
import { NAMESPACE_LABELS_SYNTAX, parseNamespaceLabels } from "./namespace-labels-flag.ts";
import { checkManifests, offlineChecker, unhonouredExceptionNote, type OfflineChecker } from "./offline-engine.ts";

export const CHECK_USAGE = `Usage: imprimatur check [--policies DIR] [--profile NAME] -f FILE|DIR|- [-f …] [options]

Evaluates Pods and the pod templates of workloads (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob, ReplicationController, PodTemplate), of custom resources registered in --config, and the images
that ImagePolicy imagePaths locate in custom resources, against the same policy set "imprimatur serve"
loads from the same --policies and --profile — the same decision /validate makes. Other objects are
listed as skipped, with the reason.

  -f, --filename PATH  manifest file, folder (recursively) or - for standard input (repeatable)
  --policies DIR       policy folder or file (default: the embedded default policy, as for serve)
  --profile NAME       bind a shipped PodRestriction profile (baseline, restricted) to every namespace, in
                       addition to the policies (repeatable; see "imprimatur profiles"); NAME@v1.25 is the
                       profile at a Pod Security Standards policy version (v1.0 to v1.37, or latest)
  --allow-empty        judge with an empty policy set (by default refused, as serve refuses to start:
                       an empty set admits everything)
  --allow-unverified   signatures that cannot be verified offline do not fail the check (exit 0); such
                       objects are still reported as unverified
  -n, --namespace NS   the namespace of objects that name none, as for kubectl (default "default")
  --namespaces FILE    namespace labels for namespaceSelector bindings (map or Namespace list)
  --namespace-labels ${NAMESPACE_LABELS_SYNTAX}
                       labels of a namespace, over those of --namespaces (repeatable), e.g.
                       --namespace-labels team-a:env=prod,tier=web
  --as USER            the user who creates the objects, as for kubectl (a service account is
                       system:serviceaccount:NAMESPACE:NAME), with the groups the apiserver adds
                       (system:authenticated, a service account's): what policies' subjects and
                       matchConditions on request.userInfo see (default: no user)
  --as-group GROUP     a group of that user (repeatable; needs --as)
  --config FILE        ServerConfig: its podTemplates (custom resources) and namespacesFile are used
  --pod-security       judge Pods and templates by their namespace's pod-security.kubernetes.io labels too, as
                       "serve --pod-security" does (the labels come from --namespaces and --namespace-labels;
                       a Pod in a namespace whose labels are not given is refused, as Pod Security Admission
                       refuses one whose namespace it cannot read)
  --pod-security-config FILE
                       Pod Security Admission's PodSecurityConfiguration, as for serve; implies --pod-security
  --exceptions-namespace NS
                       honour the PolicyExceptions of this namespace, as "serve --exceptions-namespace" does
                       (repeatable; by default none is honoured, and each one the policies hold is named)
  --strict             unknown fields in Pods and pod templates are errors (default: warnings)
  -o, --output FORMAT  text (default: one line per finding and a summary), json, yaml or junit
  -h, --help           show this help

Offline: remote ImageReview backends and registries are not asked and tags are not resolved. An image
that a rule with attestors allows is reported as unverified: its signatures cannot be checked without the
registry ("imprimatur verify" checks them). Objects are checked as written: the defaults kube-apiserver
would add are not applied.
Failures of policies or rules whose validationActions are Warn or Audit are listed apart ("warn:",
"audit:"; -o json gives every failure's validationActions) and do not fail the check: only Deny does.
Exit code: 0 all allowed (or nothing Imprimatur reviews), 1 some denied or unverified, 2 usage, manifest
or policy errors, or no object in the input.
`;

const OUTPUTS = ["text", "json", "yaml", "junit"] as const;
type Output = (typeof OUTPUTS)[number];

export async function runCheck(argv: string[]): Promise<number> {
  let values;
  let namespaceLabels;
  try {
    ({ values } = parseCommandArgs(argv, {
      policies: { type: "string" },
      filename: { type: "string", short: "f", multiple: true, default: [] },
      output: { type: "string", short: "o", default: "text" },
      namespace: { type: "string", short: "n" },
      namespaces: { type: "string" },
      "namespace-labels": { type: "string", multiple: true, default: [] },
      profile: { type: "string", multiple: true, default: [] },
      config: { type: "string" },
      strict: { type: "boolean", default: false },
      "allow-empty": { type: "boolean", default: false },
      "allow-unverified": { type: "boolean", default: false },
      as: { type: "string" },
      "as-group": { type: "string", multiple: true, default: [] },
      "pod-security": { type: "boolean", default: false },
      "pod-security-config": { type: "string" },
      "exceptions-namespace": { type: "string", multiple: true, default: [] },
    }));
    if (values["as-group"]!.length > 0 && values.as === undefined) throw new UsageError("--as-group needs --as (as for kubectl)");
    if (values.filename!.length === 0) throw new UsageError("at least one -f FILE|DIR|- is required");
    if (!OUTPUTS.includes(values.output as Output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    if (values.namespace !== undefined && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(values.namespace))
      throw new UsageError(`--namespace ${JSON.stringify(values.namespace)} is not a namespace name`);
    namespaceLabels = parseNamespaceLabels(values["namespace-labels"]!);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("check", e.message);
    throw e;
  }

  let checker: OfflineChecker;
  try {
    checker = await offlineChecker({
      policies: values.policies === undefined ? undefined : [values.policies],
      profiles: values.profile!,
      allowEmpty: values["allow-empty"]!,
      config: values.config,
      namespaces: values.namespaces,
      namespaceLabels,
      ...(values.namespace !== undefined ? { namespace: values.namespace } : {}),
      exceptionNamespaces: values["exceptions-namespace"]!,
      ...(values.as !== undefined ? { user: impersonatedUser(values.as, values["as-group"]!) } : {}),
      ...(values["pod-security"] || values["pod-security-config"] !== undefined
        ? {
            podSecurity: await podSecurityContext(values["pod-security-config"], {
              unknownNamespaceHint: "its labels are not known here: give them with --namespace-labels NAMESPACE:LABELS or --namespaces FILE",
            }),
          }
        : {}),
    });
  } catch (e) {
    process.stderr.write(`imprimatur check: ${errorText(e)}\n`);
    return 2;
  }

  for (const name of checker.unhonouredExceptions) process.stderr.write(`imprimatur check: ${unhonouredExceptionNote(name)}\n`);
  const problems: string[] = [];
  const results = await checkManifests(checker, values.filename!, values.strict!, problems);
  await checker.engine.close();
  for (const p of problems) process.stderr.write(`imprimatur check: ${p}\n`);
  // As kubectl: input with no object at all is a mistake in the command (an empty file, a path or a glob the
  // shell left unexpanded because it matched nothing). When the input's problems were printed, they are why.
  if (results.length === 0) {
    if (problems.length > 0) return 2;
    return usageFailure("check", `no object in ${values.filename!.join(", ")}`);
  }

  const output = values.output as Output;
  const allowUnverified = values["allow-unverified"]!;
  process.stdout.write(
    output === "json"
      ? renderJson(results, problems)
      : output === "yaml"
        ? renderYaml(results, problems)
        : output === "junit"
          ? renderJunit(results, problems, undefined, allowUnverified)
          : renderText(results),
  );
  const s = summarize(results);
  if (problems.length > 0 || s.errors > 0) return 2;
  return s.denied > 0 || (s.unverified > 0 && !allowUnverified) ? 1 : 0;
}
