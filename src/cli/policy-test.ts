// `imprimatur test`: policy tests with expected results. A PolicyTest file names policies (and shipped
// profiles), manifests, and the verdict expected for each named resource; every resource is judged by the
// same engine and the same per-object step as `check` (checkObject), offline. docs/policy-tests.md is the
// reference for the file format. Exit 0 when every expectation holds, 1 when any fails, 2 on errors
// (a malformed test file, a policy that does not load, an expectation naming no resource, no test found).
import { stat } from "node:fs/promises";
import { filesUnder } from "../fs/files-under.ts";
import { dirname, isAbsolute, join } from "node:path";
import { ConfigChecks, isMapping, readConfigText, yamlDocuments } from "../config/config-checks.ts";
import type { RequestUser } from "../core/admission-subject.ts";
import { impersonatedUser } from "./impersonation.ts";
import { ConfigError, renderConfigProblem, type ConfigProblem } from "../config/config-error.ts";
import type { FieldPath } from "../config/kube-yaml.ts";
import { renderViolation } from "../core/decision.ts";
import { renderAtLocation } from "../errors/source-location.ts";
import { podSecurityContext } from "../policy/pod-security-context.ts";
import { resolveProfileName, shippedProfiles, type Profile } from "../policy/profiles.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { renderUnverified, structuredViolation, type ObjectResult } from "./check-report.ts";
import { mergeNamespaceLabels, NAMESPACE_LABELS_SYNTAX, parseNamespaceLabels, type NamespaceLabels } from "./namespace-labels-flag.ts";
import { checkManifests, offlineChecker, type OfflineChecker } from "./offline-engine.ts";

export const TEST_USAGE = `Usage: imprimatur test [-o text|json] [--strict] DIR|FILE...

Runs policy tests: files named imprimatur-test.yaml (or .yml) found recursively under each DIR, or the
FILE given, each holding one or more PolicyTest documents. A test names policies, shipped profiles,
manifests and the result expected for each resource it names (allowed, denied, skipped, or warned or
audited: allowed with a failure set to Warn or Audit; and which policy and rule must deny, warn or audit
it, or must not deny it). Resources are judged offline, as "imprimatur check" judges them.
Resources a test does not name are listed as untested; they do not fail it. docs/policy-tests.md
describes the format.

  -o, --output text|json  text (default): a table of TEST, RESOURCE, EXPECTED, ACTUAL and RESULT, what
                          was found for each failure, and a summary; json: the same, structured
  --strict                unknown fields in Pods and pod templates are errors (default: warnings)
  --allow-empty           run tests whose policy set is empty (by default an error, as serve refuses to
                          start: an empty set admits everything)
  --allow-unverified      a resource whose signatures cannot be verified offline meets "allowed"
                          (by default it is "unverified", which only "result: unverified" expects)
  -n, --namespace NS      the namespace of objects that name none, for tests that give no namespace
                          (default "default")
  --namespaces FILE       namespace labels (map or Namespace list) for tests that name no namespaces file
  --namespace-labels ${NAMESPACE_LABELS_SYNTAX}
                          labels of a namespace, under those a test gives (repeatable)
  --as USER               the user who creates the resources, for tests that give no userInfo (kubectl's
                          meaning, with the groups the apiserver adds; see "imprimatur check --help")
  --as-group GROUP        a group of that user (repeatable; needs --as)
  -h, --help              show this help

The policy set is built as "imprimatur serve" builds it: the embedded default policy unless a test names
policies, with its profiles bound in addition.
Exit code: 0 every expectation holds, 1 some fail, 2 errors: a malformed test file (named with its line
and field), a missing file, policies that do not load or an empty policy set, an expectation that names
no resource or several, or no test found.
`;

/** The flags `imprimatur test` accepts, as parseArgs options. */
export const TEST_FLAGS = {
  output: { type: "string", short: "o", default: "text" },
  strict: { type: "boolean", default: false },
  "allow-empty": { type: "boolean", default: false },
  "allow-unverified": { type: "boolean", default: false },
  namespace: { type: "string", short: "n" },
  namespaces: { type: "string" },
  "namespace-labels": { type: "string", multiple: true, default: [] as string[] },
  as: { type: "string" },
  "as-group": { type: "string", multiple: true, default: [] as string[] },
  help: { type: "boolean", short: "h", default: false },
} as const;

/** How the command line sets up every test (a test's own fields take precedence). */
export interface TestRunOptions {
  strict: boolean;
  allowEmpty?: boolean;
  allowUnverified?: boolean;
  /** -n: the namespace of objects that name none, unless the test gives one. */
  namespace?: string;
  /** --namespaces: the labels file of tests that name none. */
  namespaces?: string;
  /** --namespace-labels: under the test's own namespaceLabels. */
  namespaceLabels?: NamespaceLabels;
  /** --as, --as-group: who creates the resources of tests that give no userInfo. */
  user?: RequestUser;
}

/** The names a test file has in a folder (a file named on the command line may have any name). */
export const TEST_FILE_NAMES: readonly string[] = ["imprimatur-test.yaml", "imprimatur-test.yml"];

/** Its apiVersion is imprimatur.dev/v1alpha1, as for every configuration file (ConfigChecks.header). */
export const POLICY_TEST_KIND = "PolicyTest";

const OUTPUTS = ["text", "json"] as const;
type Output = (typeof OUTPUTS)[number];

const EXPECTABLE = ["allowed", "denied", "unverified", "skipped", "warned", "audited"] as const;
type Expected = (typeof EXPECTABLE)[number];

const TEST_KEYS = [
  "apiVersion",
  "kind",
  "metadata",
  "description",
  "policies",
  "profiles",
  "config",
  "namespace",
  "namespaces",
  "namespaceLabels",
  "userInfo",
  "podSecurity",
  "podSecurityConfig",
  "exceptionNamespaces",
  "resources",
  "results",
];
const METADATA_KEYS = ["name"];
const RESULT_KEYS = ["resource", "namespace", "result", "policy", "rule"];
/** KIND/NAME */
const RESOURCE = /^([^/\s]+)\/([^/\s]+)$/;

/** One expectation of a test: `results[index]`. */
export interface Expectation {
  index: number;
  /** As written: "Pod/root". */
  resource: string;
  kind: string;
  name: string;
  namespace?: string;
  result: Expected;
  policy?: string;
  rule?: string;
  /** The line of `results[index]` in the test file. */
  line?: number;
}

/** A PolicyTest document, checked, with its paths resolved against the test file's folder. */
export interface PolicyTest {
  file: string;
  name: string;
  description?: string;
  /** undefined: the embedded default policy (as `serve` and `check`); the profiles are bound in addition. */
  policies?: string[];
  profiles: string[];
  config?: string;
  /** The namespace of resources that name none. */
  namespace?: string;
  namespaces?: string;
  /** Labels of namespaces, over those of the namespaces file. */
  namespaceLabels?: Map<string, Record<string, string>>;
  /** Who creates the resources (`userInfo: {username, groups}`), with the groups the apiserver adds. */
  user?: RequestUser;
  /** Pod Security Admission by the namespaces' labels (`podSecurity: true`, or `podSecurityConfig: FILE`). */
  podSecurity?: { config?: string };
  /** The namespaces whose PolicyExceptions are honoured, as serve --exceptions-namespace. */
  exceptionNamespaces?: string[];
  resources: string[];
  results: Expectation[];
}

export type Status = "pass" | "fail";

/** The outcome of one expectation. */
export interface TestRow {
  test: string;
  testFile: string;
  expected: Expectation;
  /** The object it matched. */
  object: ObjectResult;
  status: Status;
  /** Why it failed. */
  why?: string;
}

/** An object of a test that no expectation names. */
export interface Untested {
  test: string;
  testFile: string;
  object: ObjectResult;
}

export interface TestReport {
  /** The tests run, in order (tests whose policies failed to load are not among them). */
  tests: Array<{ name: string; file: string; description?: string }>;
  rows: TestRow[];
  untested: Untested[];
  /** Every error, each naming its file (and line and field when it has them). */
  errors: string[];
}

export async function runPolicyTest(argv: string[]): Promise<number> {
  let values;
  let positionals: string[];
  let namespaceLabels;
  try {
    ({ values, positionals } = parseCommandArgs(argv, TEST_FLAGS, true));
    if (values.help) {
      process.stdout.write(TEST_USAGE);
      return 0;
    }
    if (!OUTPUTS.includes(values.output as Output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    if (positionals.length === 0) throw new UsageError("give at least one test folder or file (DIR|FILE)");
    if (values.namespace !== undefined && !NAMESPACE.test(values.namespace))
      throw new UsageError(`--namespace ${JSON.stringify(values.namespace)} is not a namespace name`);
    namespaceLabels = parseNamespaceLabels(values["namespace-labels"]!);
    if (values["as-group"]!.length > 0 && values.as === undefined) throw new UsageError("--as-group needs --as (as for kubectl)");
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("test", e.message);
    throw e;
  }

  const report = await runPolicyTests(positionals, {
    strict: values.strict!,
    allowEmpty: values["allow-empty"]!,
    allowUnverified: values["allow-unverified"]!,
    ...(values.namespace !== undefined ? { namespace: values.namespace } : {}),
    ...(values.namespaces !== undefined ? { namespaces: values.namespaces } : {}),
    namespaceLabels,
    ...(values.as !== undefined ? { user: impersonatedUser(values.as, values["as-group"]!) } : {}),
  });
  for (const e of report.errors) for (const line of e.split("\n")) process.stderr.write(`imprimatur test: ${line}\n`);
  process.stdout.write(values.output === "json" ? renderTestJson(report) : renderTestText(report));
  return exitCode(report);
}

/** 2 on any error or when nothing was tested, 1 when an expectation fails, else 0. */
export function exitCode(report: TestReport): number {
  if (report.errors.length > 0 || report.rows.length === 0) return 2;
  return report.rows.some((r) => r.status === "fail") ? 1 : 0;
}

/** Finds the test files of `targets`, checks them, and runs every test. Never throws for bad input. */
export async function runPolicyTests(targets: readonly string[], opts: TestRunOptions): Promise<TestReport> {
  const report: TestReport = { tests: [], rows: [], untested: [], errors: [] };
  const files: string[] = [];
  for (const target of targets) files.push(...(await findTestFiles(target, report.errors)));
  if (files.length === 0 && report.errors.length === 0) {
    report.errors.push(`no test found: no ${TEST_FILE_NAMES.join(" or ")} under ${targets.join(", ")}`);
  }
  for (const file of files) {
    let tests: PolicyTest[];
    try {
      tests = await readPolicyTests(file);
    } catch (e) {
      if (e instanceof ConfigError) report.errors.push(...e.problems.map(renderConfigProblem));
      else report.errors.push(`${file}: ${(e as Error).message}`);
      continue;
    }
    for (const test of tests) await runOne(test, opts, report);
  }
  return report;
}

async function findTestFiles(target: string, errors: string[]): Promise<string[]> {
  let out: string[];
  try {
    out = await filesUnder(target, (name) => TEST_FILE_NAMES.includes(name));
  } catch (e) {
    errors.push(`${target}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file or directory" : (e as Error).message}`);
    return [];
  }
  if (out.length === 0) errors.push(`${target}: no test found (no file named ${TEST_FILE_NAMES.join(" or ")})`);
  return out;
}

/**
 * The PolicyTest documents of a file, checked strictly: unknown fields, a wrong apiVersion or kind, missing
 * required fields and files that do not exist are problems. Throws one ConfigError listing all of them, each
 * with the file, line and field.
 */
export async function readPolicyTests(file: string): Promise<PolicyTest[]> {
  const documents = yamlDocuments(await readConfigText(file, "policy test"), file);
  const profiles = await shippedProfiles();
  const problems: ConfigProblem[] = [];
  const checks = new ConfigChecks(file, () => undefined, problems);
  if (documents.length === 0) checks.problem([], `holds no ${POLICY_TEST_KIND} document`);
  const tests: PolicyTest[] = [];
  for (const document of documents) {
    const before = problems.length;
    const test = await checkPolicyTest(document.value, file, checks.withLines(document.lineOf), document.lineOf, profiles);
    if (test && problems.length === before) tests.push(test);
  }
  checks.throwIfAny();
  return tests;
}

async function checkPolicyTest(
  raw: unknown,
  file: string,
  checks: ConfigChecks,
  lineOf: (path: FieldPath) => number | undefined,
  profiles: ReadonlyMap<string, Profile>,
): Promise<PolicyTest | undefined> {
  const o = checks.mapping(raw, [], TEST_KEYS);
  if (!o) return undefined;
  checks.header(o, POLICY_TEST_KIND);
  const base = dirname(file);
  const at = (p: string) => (isAbsolute(p) ? p : join(base, p));

  let name: string | undefined;
  const meta =
    o.metadata === undefined
      ? checks.problem(["metadata"], "is required (metadata.name names the test)")
      : checks.mapping(o.metadata, ["metadata"], METADATA_KEYS);
  if (meta)
    name = typeof meta.name === "string" && meta.name !== "" ? meta.name : checks.problem(["metadata", "name"], "must be a non-empty string (the test's name)");
  if (o.description !== undefined && typeof o.description !== "string") checks.problem(["description"], "must be a string");

  const pathList = async (key: string, required: boolean): Promise<string[] | undefined> => {
    const v = o[key];
    if (v === undefined) return required ? checks.problem([key], "is required: a list of files or folders, relative to the test file") : undefined;
    const list = checks.list(v, [key], "must be a list of files or folders, relative to the test file");
    if (!list) return undefined;
    if (required && list.length === 0) return checks.problem([key], "must name at least one file or folder");
    const out: string[] = [];
    for (const [i, p] of list.entries()) {
      const path = checks.filePath(p, [key, i], "must be a file or folder path");
      if (path !== undefined && (await exists(at(path), [key, i], checks, false))) out.push(at(path));
    }
    return out;
  };
  const onePath = async (key: string): Promise<string | undefined> => {
    if (o[key] === undefined) return undefined;
    const path = checks.filePath(o[key], [key], "must be a file path, relative to the test file");
    return path !== undefined && (await exists(at(path), [key], checks, true)) ? at(path) : undefined;
  };

  const policies = await pathList("policies", false);
  const profileNames: string[] = [];
  if (o.profiles !== undefined) {
    const list = checks.list(o.profiles, ["profiles"], "must be a list of shipped profile names");
    for (const [i, p] of (list ?? []).entries()) {
      // The names check, serve and spec.profile accept: baseline, restricted@v1.25, restricted@latest.
      const resolved = typeof p === "string" ? resolveProfileName(p, profiles) : undefined;
      if (resolved?.ok) profileNames.push(p as string);
      else checks.problem(["profiles", i], resolved?.message ?? `must be a shipped profile name (${[...profiles.keys()].join(", ")})`);
    }
  }
  const config = await onePath("config");
  let namespace: string | undefined;
  if (o.namespace !== undefined) {
    if (typeof o.namespace === "string" && NAMESPACE.test(o.namespace)) namespace = o.namespace;
    else checks.problem(["namespace"], "must be a namespace name: the namespace of resources that name none");
  }
  const namespaces = await onePath("namespaces");
  const namespaceLabels = o.namespaceLabels === undefined ? undefined : checkNamespaceLabels(o.namespaceLabels, checks);
  const user = o.userInfo === undefined ? undefined : checkUserInfo(o.userInfo, checks);
  if (o.podSecurity !== undefined && typeof o.podSecurity !== "boolean")
    checks.problem(["podSecurity"], "must be true or false: whether the namespaces' pod-security.kubernetes.io labels apply, as serve --pod-security");
  const podSecurityConfig = await onePath("podSecurityConfig");
  const podSecurity = podSecurityConfig !== undefined ? { config: podSecurityConfig } : o.podSecurity === true ? {} : undefined;
  let exceptionNamespaces: string[] | undefined;
  if (o.exceptionNamespaces !== undefined) {
    const list = checks.list(o.exceptionNamespaces, ["exceptionNamespaces"], "must be a list of namespace names");
    exceptionNamespaces = [];
    for (const [i, ns] of (list ?? []).entries()) {
      if (typeof ns === "string" && NAMESPACE.test(ns)) exceptionNamespaces.push(ns);
      else checks.problem(["exceptionNamespaces", i], "must be a namespace name: one whose PolicyExceptions are honoured, as serve --exceptions-namespace");
    }
  }
  const resources = await pathList("resources", true);

  const results: Expectation[] = [];
  if (o.results === undefined) checks.problem(["results"], "is required: the expected result of each resource tested");
  else {
    const list = checks.list(o.results, ["results"], "must be a list of expected results");
    if (list && list.length === 0) checks.problem(["results"], "must have at least one expected result");
    for (const [i, r] of (list ?? []).entries()) {
      const e = checkExpectation(r, i, checks);
      if (e) results.push({ ...e, ...lineField(lineOf(["results", i])) });
    }
  }

  if (name === undefined || resources === undefined) return undefined;
  return {
    file,
    name,
    ...(typeof o.description === "string" ? { description: o.description } : {}),
    ...(policies !== undefined ? { policies } : {}),
    profiles: profileNames,
    ...(config !== undefined ? { config } : {}),
    ...(namespace !== undefined ? { namespace } : {}),
    ...(namespaces !== undefined ? { namespaces } : {}),
    ...(namespaceLabels !== undefined ? { namespaceLabels } : {}),
    ...(user !== undefined ? { user } : {}),
    ...(podSecurity !== undefined ? { podSecurity } : {}),
    ...(exceptionNamespaces !== undefined ? { exceptionNamespaces } : {}),
    resources,
    results,
  };
}

/** `userInfo: {username: alice, groups: [developers]}`: as `--as alice --as-group developers`. */
function checkUserInfo(raw: unknown, checks: ConfigChecks): RequestUser | undefined {
  const o = checks.mapping(raw, ["userInfo"], ["username", "groups"]);
  if (!o) return undefined;
  if (typeof o.username !== "string" || o.username === "")
    return checks.problem(["userInfo", "username"], "must be a user name (a service account is system:serviceaccount:NAMESPACE:NAME)");
  const groups = o.groups === undefined ? [] : checks.list(o.groups, ["userInfo", "groups"], "must be a list of group names");
  if (!groups) return undefined;
  if (groups.some((g) => typeof g !== "string" || g === "")) return checks.problem(["userInfo", "groups"], "must be a list of group names");
  return impersonatedUser(o.username, groups as string[]);
}

/** A namespace name (a DNS label). */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** `namespaceLabels: {team-a: {env: prod}}`: string labels per namespace, with kubernetes.io/metadata.name added. */
function checkNamespaceLabels(raw: unknown, checks: ConfigChecks): Map<string, Record<string, string>> | undefined {
  const map = isMapping(raw) ? raw : checks.problem(["namespaceLabels"], "must be a map of namespace → labels, e.g. {team-a: {env: prod}}");
  if (!map) return undefined;
  const out = new Map<string, Record<string, string>>();
  for (const [ns, labels] of Object.entries(map)) {
    if (!NAMESPACE.test(ns)) checks.problem(["namespaceLabels", ns], "is not a namespace name");
    const l = labels === null ? {} : isMapping(labels) ? labels : checks.problem(["namespaceLabels", ns], "must be a map of label → value");
    if (!l) continue;
    const strings: Record<string, string> = { "kubernetes.io/metadata.name": ns };
    for (const [k, v] of Object.entries(l)) {
      if (typeof v === "string") strings[k] = v;
      else checks.problem(["namespaceLabels", ns, k], `label value must be a string, got ${JSON.stringify(v)}; quote it`);
    }
    out.set(ns, strings);
  }
  return out;
}

function checkExpectation(raw: unknown, i: number, checks: ConfigChecks): Omit<Expectation, "line"> | undefined {
  const path = ["results", i];
  const r = checks.mapping(raw, path, RESULT_KEYS);
  if (!r) return undefined;
  let ok = true;
  const bad = (field: string, message: string) => {
    checks.problem([...path, field], message);
    ok = false;
  };
  const m = typeof r.resource === "string" ? RESOURCE.exec(r.resource) : null;
  if (r.resource === undefined) bad("resource", "is required: KIND/NAME, e.g. Pod/web");
  else if (!m) bad("resource", `must be KIND/NAME, e.g. Pod/web; got ${JSON.stringify(r.resource)}`);
  if (r.namespace !== undefined && (typeof r.namespace !== "string" || r.namespace === "")) bad("namespace", "must be a namespace name");
  if (r.result === undefined) bad("result", `is required: ${EXPECTABLE.join(", ")}`);
  else if (!EXPECTABLE.includes(r.result as Expected)) bad("result", `must be one of ${EXPECTABLE.join(", ")}; got ${JSON.stringify(r.result)}`);
  if (r.policy !== undefined && (typeof r.policy !== "string" || r.policy === ""))
    bad("policy", "must be a policy name (metadata.name; profile-NAME for a shipped profile)");
  if (r.rule !== undefined && (typeof r.rule !== "string" || r.rule === ""))
    bad("rule", "must be a rule name as violations give it (rules[1], restricted/runAsUser)");
  if (r.rule !== undefined && r.policy === undefined) bad("rule", "needs policy: a rule is named within a policy");
  if (r.policy !== undefined && r.result === "skipped")
    bad("policy", "only with result allowed, denied, unverified, warned or audited: a skipped resource is judged by no policy");
  if (!ok || !m) return undefined;
  return {
    index: i,
    resource: r.resource as string,
    kind: m[1]!,
    name: m[2]!,
    ...(r.namespace !== undefined ? { namespace: r.namespace as string } : {}),
    result: r.result as Expected,
    ...(r.policy !== undefined ? { policy: r.policy as string } : {}),
    ...(r.rule !== undefined ? { rule: r.rule as string } : {}),
  };
}

async function exists(path: string, field: FieldPath, checks: ConfigChecks, fileOnly: boolean): Promise<boolean> {
  try {
    const info = await stat(path);
    if (fileOnly && !info.isFile()) {
      checks.problem(field, `${path} is not a file`);
      return false;
    }
    return true;
  } catch (e) {
    checks.problem(field, `${path}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file or directory" : (e as Error).message}`);
    return false;
  }
}

function lineField(line: number | undefined): { line?: number } {
  return line === undefined ? {} : { line };
}

async function runOne(test: PolicyTest, opts: TestRunOptions, report: TestReport): Promise<void> {
  const where = `${test.file} (test ${JSON.stringify(test.name)})`;
  let checker: OfflineChecker;
  try {
    checker = await offlineChecker({
      policies: test.policies,
      profiles: test.profiles,
      allowEmpty: opts.allowEmpty === true,
      config: test.config,
      namespaces: test.namespaces ?? opts.namespaces,
      namespaceLabels: mergeNamespaceLabels(opts.namespaceLabels ?? new Map(), test.namespaceLabels ?? new Map()),
      ...((test.namespace ?? opts.namespace) !== undefined ? { namespace: (test.namespace ?? opts.namespace)! } : {}),
      ...((test.user ?? opts.user) !== undefined ? { user: (test.user ?? opts.user)! } : {}),
      ...(test.exceptionNamespaces ? { exceptionNamespaces: test.exceptionNamespaces } : {}),
      ...(test.podSecurity
        ? {
            podSecurity: await podSecurityContext(test.podSecurity.config, {
              unknownNamespaceHint: "its labels are not known here: give them with namespaceLabels or namespaces",
            }),
          }
        : {}),
    });
  } catch (e) {
    report.errors.push(`${where}: ${(e as Error).message}`);
    return;
  }

  const problems: string[] = [];
  let objects: ObjectResult[];
  try {
    objects = await checkManifests(checker, test.resources, opts.strict, problems);
  } finally {
    await checker.engine.close();
  }
  for (const p of problems) report.errors.push(`${where}: resources: ${p}`);
  report.tests.push({ name: test.name, file: test.file, ...(test.description !== undefined ? { description: test.description } : {}) });

  const named = new Set<ObjectResult>();
  for (const expected of test.results) {
    const found = objects.filter(
      (o) => o.kind === expected.kind && o.name === expected.name && (expected.namespace === undefined || o.namespace === expected.namespace),
    );
    if (found.length !== 1) {
      report.errors.push(
        renderAtLocation(
          { file: test.file, line: expected.line, details: [`test ${JSON.stringify(test.name)}`, `results[${expected.index}]`] },
          unmatched(expected, found, objects),
        ),
      );
      continue;
    }
    const object = found[0]!;
    named.add(object);
    const why = judge(expected, object, opts.allowUnverified === true);
    report.rows.push({
      test: test.name,
      testFile: test.file,
      expected,
      object,
      status: why === undefined ? "pass" : "fail",
      ...(why !== undefined ? { why } : {}),
    });
  }
  for (const object of objects) if (!named.has(object)) report.untested.push({ test: test.name, testFile: test.file, object });
}

function unmatched(expected: Expectation, found: readonly ObjectResult[], objects: readonly ObjectResult[]): string {
  const what = `${expected.resource}${expected.namespace !== undefined ? ` in namespace ${expected.namespace}` : ""}`;
  if (found.length > 1) {
    const list = found.map((o) => `${o.kind}/${o.name} in ${o.namespace} (${o.file})`).join(", ");
    const oneNamespace = found.every((o) => o.namespace === found[0]!.namespace);
    return `${what} matches ${found.length} resources: ${list}; ${oneNamespace ? "a test's resources need unique kinds, names and namespaces" : "give its namespace"}`;
  }
  const MAX = 10;
  const known = objects.slice(0, MAX).map((o) => `${o.kind}/${o.name}${o.namespace !== "default" ? ` in ${o.namespace}` : ""}`);
  const more = objects.length > MAX ? ` and ${objects.length - MAX} more` : "";
  return `${what} matches no resource of the test; ${objects.length === 0 ? "its resources hold no object" : `its resources: ${known.join(", ")}${more}`}`;
}

/**
 * undefined when the object's verdict is what `expected` says; else why not. With `allowUnverified`, an object
 * allowed but for signatures offline cannot verify meets "allowed".
 */
export function judge(expected: Expectation, object: ObjectResult, allowUnverified = false): string | undefined {
  if (expected.result === "warned" || expected.result === "audited") return judgeAdvisory(expected, object, allowUnverified);
  const got = allowUnverified && object.result === "unverified" && expected.result === "allowed" ? "allowed" : object.result;
  if (got !== expected.result) {
    const detail =
      object.reason !== undefined ? `: ${object.reason}` : object.violations.length > 0 ? ` (${plural(object.violations.length, "violation")})` : "";
    return `expected ${expected.result}, got ${got}${detail}`;
  }
  if (expected.policy === undefined) return undefined;
  const label = `${expected.policy}${expected.rule !== undefined ? ` ${expected.rule}` : ""}`;
  const of = object.violations.filter((v) => v.policy === expected.policy && (expected.rule === undefined || v.rule === expected.rule));
  if (expected.result === "denied" && of.length === 0)
    return `denied, but not by ${label}: no such violation among the ${plural(object.violations.length, "violation")} found`;
  if (expected.result === "allowed" && of.length > 0) return `allowed, but with ${plural(of.length, "violation")} of ${label}`;
  const unverifiedBy = (object.unverified ?? []).filter((u) => u.policy === expected.policy && (expected.rule === undefined || u.rule === expected.rule));
  if (expected.result === "unverified" && object.result === "unverified" && unverifiedBy.length === 0)
    return `unverified, but not under ${label}: ${(object.unverified ?? []).map((u) => `${u.policy} ${u.rule}`).join(", ")}`;
  return undefined;
}

/** "warned" and "audited": admitted, with a failure set to Warn (or Audit), of the policy and rule if named. */
function judgeAdvisory(expected: Expectation, object: ObjectResult, allowUnverified: boolean): string | undefined {
  const admitted = object.result === "allowed" || (allowUnverified && object.result === "unverified");
  if (!admitted) {
    const detail =
      object.reason !== undefined ? `: ${object.reason}` : object.violations.length > 0 ? ` (${plural(object.violations.length, "violation")})` : "";
    return `expected ${expected.result}, got ${object.result}${detail}`;
  }
  const action = expected.result === "warned" ? "Warn" : "Audit";
  const advisories = object.advisories ?? [];
  const found = advisories.filter(
    (v) =>
      (v.actions ?? []).includes(action) &&
      (expected.policy === undefined || v.policy === expected.policy) &&
      (expected.rule === undefined || v.rule === expected.rule),
  );
  if (found.length > 0) return undefined;
  const label = expected.policy === undefined ? "" : ` by ${expected.policy}${expected.rule !== undefined ? ` ${expected.rule}` : ""}`;
  const others = advisories.map((v) => `${v.policy} ${v.rule} (${(v.actions ?? []).join(", ")})`);
  return `allowed, but not ${expected.result}${label}: ${others.length > 0 ? `its failures set to Warn or Audit are ${others.join(", ")}` : "no failure set to Warn or Audit"}`;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

export function expectedText(e: Expectation): string {
  if (e.policy === undefined) return e.result;
  const label = `${e.policy}${e.rule !== undefined ? ` ${e.rule}` : ""}`;
  if (e.result === "warned" || e.result === "audited") return `${e.result} by ${label}`;
  return e.result === "denied" ? `denied by ${label}` : e.result === "unverified" ? `unverified under ${label}` : `${e.result}, no violation of ${label}`;
}

function resourceText(kind: string, name: string, namespace: string, showNamespace: boolean): string {
  return `${kind}/${name}${showNamespace ? ` in ${namespace}` : ""}`;
}

export interface TestSummary {
  tests: number;
  passed: number;
  failed: number;
  untested: number;
  errors: number;
}

export function summarizeTests(report: TestReport): TestSummary {
  const passed = report.rows.filter((r) => r.status === "pass").length;
  return { tests: report.rows.length, passed, failed: report.rows.length - passed, untested: report.untested.length, errors: report.errors.length };
}

/** "12 tests: 11 passed, 1 failed", then untested resources and errors when there are any. */
export function testSummaryLine(s: TestSummary): string {
  const extra = [s.untested > 0 ? `${plural(s.untested, "resource")} untested` : "", s.errors > 0 ? plural(s.errors, "error") : ""].filter(Boolean);
  return `${plural(s.tests, "test")}: ${s.passed} passed, ${s.failed} failed${extra.map((x) => `, ${x}`).join("")}`;
}

/** The table (untested resources included), what was found for each failure, and the summary line. */
export function renderTestText(report: TestReport): string {
  const table: string[][] = [["TEST", "RESOURCE", "EXPECTED", "ACTUAL", "RESULT"]];
  for (const t of report.tests) {
    const of = (x: { test: string; testFile: string }) => x.test === t.name && x.testFile === t.file;
    for (const r of report.rows.filter(of)) {
      table.push([
        r.test,
        resourceText(r.object.kind, r.object.name, r.object.namespace, r.expected.namespace !== undefined),
        expectedText(r.expected),
        r.object.result,
        r.status,
      ]);
    }
    for (const u of report.untested.filter(of)) {
      table.push([u.test, resourceText(u.object.kind, u.object.name, u.object.namespace, u.object.namespace !== "default"), "-", u.object.result, "untested"]);
    }
  }
  const lines: string[] = [];
  if (table.length > 1) {
    const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
    for (const row of table) lines.push(row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]! + 2))).join(""));
  }
  const failures = report.rows.filter((r) => r.status === "fail");
  if (failures.length > 0) lines.push("", "Failures:");
  for (const r of failures) {
    lines.push(`${r.test}: ${r.object.kind}/${r.object.name} in ${r.object.namespace} (${r.object.file}): ${r.why}`);
    for (const v of r.object.violations) lines.push(`  found: ${renderViolation(v)}`);
    for (const u of r.object.unverified ?? []) lines.push(`  unverified: ${renderUnverified(u)}`);
    if (r.object.violations.length === 0 && r.object.reason === undefined) lines.push("  found: no violation");
    if (r.object.reason !== undefined) lines.push(`  ${r.object.result}: ${r.object.reason}`);
    for (const w of r.object.warnings) lines.push(`  warning: ${w}`);
  }
  if (lines.length > 0) lines.push("");
  lines.push(testSummaryLine(summarizeTests(report)));
  return `${lines.join("\n")}\n`;
}

export function testReportObject(report: TestReport) {
  const tests = report.tests.map((t) => ({ ...t, results: [] as unknown[], untested: [] as unknown[] }));
  const entry = (name: string, file: string) => tests.find((t) => t.name === name && t.file === file)!;
  for (const r of report.rows) {
    const e = r.expected;
    entry(r.test, r.testFile).results.push({
      resource: e.resource,
      namespace: r.object.namespace,
      file: r.object.file,
      expected: { result: e.result, ...(e.policy !== undefined ? { policy: e.policy } : {}), ...(e.rule !== undefined ? { rule: e.rule } : {}) },
      actual: r.object.result,
      status: r.status,
      ...(r.why !== undefined ? { why: r.why } : {}),
      ...(r.object.reason !== undefined ? { reason: r.object.reason } : {}),
      violations: r.object.violations.map(structuredViolation),
      ...(r.object.unverified !== undefined ? { unverified: r.object.unverified } : {}),
      warnings: r.object.warnings,
    });
  }
  for (const u of report.untested) {
    entry(u.test, u.testFile).untested.push({
      resource: `${u.object.kind}/${u.object.name}`,
      namespace: u.object.namespace,
      file: u.object.file,
      actual: u.object.result,
    });
  }
  return { tests, summary: summarizeTests(report), errors: report.errors };
}

export function renderTestJson(report: TestReport): string {
  return `${JSON.stringify(testReportObject(report), null, 2)}\n`;
}
