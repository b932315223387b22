// `imprimatur check`: evaluates manifests offline with the built-in engine, for CI pipelines.
// Exit 0 when every object is allowed, 1 when any is denied, 2 on usage, manifest or policy-load errors.
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { builtinEngine } from "../backends/builtin-engine.ts";
import { NO_NAMESPACE_LABELS, type NamespaceLabelSource } from "../core/namespace-labels.ts";
import { loadNamespacesFile } from "../config/namespaces-file.ts";
import { combineDecisions, renderViolation } from "../core/decision.ts";
import { podImages } from "../core/pod-images.ts";
import { decidePodRestrictions } from "../core/pod-restriction/pod-restriction-decision.ts";
import { PodRestrictionIndex } from "../core/pod-restriction/restriction-index.ts";
import { podsInObject, podSpecLocation } from "../core/workload-templates.ts";
import { loadPolicies } from "../policy/load-policies.ts";
import { bindProfileClusterWide, shippedProfiles } from "../policy/profiles.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { EMBEDDED_POLICIES, parseCommandArgs, UsageError } from "./args.ts";

export const CHECK_USAGE = `Usage: imprimatur check [--policies DIR] [--profile NAME] -f FILE|DIR [-f …] [--output text|json] [--namespaces FILE]

Evaluates Pods and the pod templates of workloads (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob, ReplicationController) found in the manifests against the ImagePolicies and PodRestrictions of the
policy folder. Objects without a namespace are checked as "default".

  --profile NAME       also bind a shipped PodRestriction profile (baseline, restricted) to every namespace
                       (repeatable; see "imprimatur profiles")
  --namespaces FILE    namespace labels for namespaceSelector bindings (map or Namespace list)

Objects are checked as written: the defaults kube-apiserver would add are not applied.
Exit code: 0 all allowed, 1 some denied, 2 usage or load errors.
`;

export interface CheckResult {
  file: string;
  kind: string;
  name: string;
  namespace: string;
  allowed: boolean;
  reasons: string[];
}

export async function runCheck(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseCommandArgs(argv, {
      policies: { type: "string" },
      filename: { type: "string", short: "f", multiple: true, default: [] },
      output: { type: "string", short: "o", default: "text" },
      namespaces: { type: "string" },
      profile: { type: "string", multiple: true, default: [] },
    }));
    if (values.filename!.length === 0) throw new UsageError("at least one -f FILE|DIR is required");
    if (values.output !== "text" && values.output !== "json") throw new UsageError(`--output must be text or json, got ${values.output}`);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`imprimatur check: ${e.message}\n\n${CHECK_USAGE}`);
      return 2;
    }
    throw e;
  }

  let engine;
  let restrictions: PodRestrictionIndex;
  let namespaces: NamespaceLabelSource;
  try {
    const { imagePolicies, podRestrictions } = await loadPolicies(values.policies ?? EMBEDDED_POLICIES);
    const profiles = await shippedProfiles();
    const bound = values.profile!.map((name) => bindProfileClusterWide(name, profiles));
    restrictions = new PodRestrictionIndex([...bound, ...podRestrictions]);
    namespaces = values.namespaces ? await loadNamespacesFile(values.namespaces) : NO_NAMESPACE_LABELS;
    engine = builtinEngine(() => imagePolicies, namespaces);
  } catch (e) {
    process.stderr.write(`imprimatur check: ${e instanceof PolicyLoadError ? e.message : (e as Error).message}\n`);
    return 2;
  }

  const results: CheckResult[] = [];
  const problems: string[] = [];
  for (const target of values.filename!) {
    for (const file of await manifestFiles(target, problems)) {
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (e) {
        problems.push(`${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        continue;
      }
      for (const obj of manifestObjects(text, file, problems)) {
        const location = podSpecLocation(obj);
        if (!location) continue; // objects that run no pods
        const meta = (obj.metadata ?? {}) as { name?: string; namespace?: string };
        const namespace = meta.namespace ?? "default";
        const images = podImages(location.spec, location.annotations, namespace, location.fieldPrefix);
        let decision = engine({ spec: images.spec, fields: images.images.map((i) => i.field) });
        const labels = namespaces.labels(namespace);
        for (const pod of podsInObject(obj)) decision = combineDecisions(decision, decidePodRestrictions(restrictions, pod, namespace, labels));
        results.push({
          file,
          kind: String(obj.kind),
          name: meta.name ?? "",
          namespace,
          allowed: decision.allowed,
          reasons: decision.allowed ? decision.warnings : decision.violations.map(renderViolation),
        });
      }
    }
  }

  for (const p of problems) process.stderr.write(`imprimatur check: ${p}\n`);
  if (values.output === "json") {
    process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  } else {
    for (const r of results) {
      const verdict = r.allowed ? "allowed" : "denied";
      process.stdout.write(`${r.file} ${r.kind}/${r.name}: ${verdict}${r.reasons.length ? `: ${r.reasons.join("; ")}` : ""}\n`);
    }
  }
  if (problems.length > 0) return 2;
  return results.every((r) => r.allowed) ? 0 : 1;
}

async function manifestFiles(target: string, problems: string[]): Promise<string[]> {
  if (target === "-") return ["/dev/stdin"];
  try {
    const info = await stat(target);
    if (info.isFile()) return [target];
    const out: string[] = [];
    for (const e of (await readdir(target, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const full = join(target, e.name);
      if (e.isDirectory()) out.push(...(await manifestFiles(full, problems)));
      else if (/\.(ya?ml|json)$/i.test(e.name)) out.push(full);
    }
    return out;
  } catch (e) {
    problems.push(`${target}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file or directory" : (e as Error).message}`);
    return [];
  }
}

/** Every object in a multi-document file, with List kinds expanded. */
function manifestObjects(text: string, file: string, problems: string[]): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) return out;
  docs.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      problems.push(`${file} (document ${i + 1}): not valid YAML: ${doc.errors[0]!.message.split("\n")[0]}`);
      return;
    }
    const add = (v: unknown) => {
      if (typeof v !== "object" || v === null || Array.isArray(v)) return;
      const o = v as Record<string, unknown>;
      if (typeof o.kind === "string" && o.kind.endsWith("List") && Array.isArray(o.items)) o.items.forEach(add);
      else out.push(o);
    };
    add(doc.toJS({ maxAliasCount: 50 }));
  });
  return out;
}
