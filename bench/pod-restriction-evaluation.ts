// PodRestriction evaluation cost with 1, 100 and 1,000 PodRestrictions loaded, as a ratio to 1, measured in
// the same run. The policies are bound across many namespaces (by name, by matchLabels, by an In or an
// Exists expression, and 1 in 20 by a NotIn selector that must be checked one by one), so a review binds only a
// handful of them: the cost of finding those among all others is what grows with the count. Each pod is a
// Deployment template judged by the shipped restricted profile (every check runs), in rotating namespaces.
//
//   node bench/pod-restriction-evaluation.ts [--iterations 20000] [--rounds 7] [--json]
//
// Exit 0 when every decision was as expected (whether or not the target is met), 1 otherwise, 2 on usage.
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { compilePodRestriction, type PodRestriction } from "../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../src/core/pod-under-review.ts";
import { decidePodRestrictions } from "../src/core/pod-restriction/pod-restriction-decision.ts";
import { PodRestrictionIndex } from "../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../src/core/workload-templates.ts";
import { profileSources, shippedProfiles } from "../src/policy/profiles.ts";

const TARGET_RATIO = 1.5;
const SIZES = [1, 100, 1000] as const;
const NAMESPACES = 50;

const USAGE = `Usage: node bench/pod-restriction-evaluation.ts [--iterations N] [--rounds N] [--json]

  --iterations N   decisions per size and round (default 20000)
  --rounds N       alternate the sizes N times; the median round counts (default 7)
  --json           print the results as JSON only
`;

function options() {
  try {
    const { values } = parseArgs({
      options: { iterations: { type: "string", default: "20000" }, rounds: { type: "string", default: "7" }, json: { type: "boolean", default: false } },
      strict: true,
    });
    const iterations = Number(values.iterations);
    const rounds = Number(values.rounds);
    if (!Number.isInteger(iterations) || iterations < 100 || iterations > 10_000_000) throw new Error("--iterations must be an integer in 100..10000000");
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 100) throw new Error("--rounds must be an integer in 1..100");
    return { iterations, rounds, json: values.json };
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
}

/** Namespace i carries labels team=t<i%10>, env=<prod|dev>, and one unique label. */
function namespaceLabels(i: number): Record<string, string> {
  return { "kubernetes.io/metadata.name": `ns-${i}`, team: `t${i % 10}`, env: i % 2 ? "prod" : "dev", [`unique-${i}`]: "yes" };
}

/**
 * Policy 0 binds the restricted profile to every namespace (the one policy of size 1). The others are spread
 * over namespaces that mostly do not exist in the run, in the four binding styles, and each restricts a
 * little (a required label) so that a bound one costs real work.
 */
function policies(count: number, profiles: ReadonlyMap<string, unknown>): PodRestriction[] {
  const out: PodRestriction[] = [];
  const compile = (doc: object) => {
    const r = compilePodRestriction({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", ...doc }, { profiles });
    if (!r.policy) throw new Error(`bench policy does not compile: ${JSON.stringify(r.issues)}`);
    out.push(r.policy);
  };
  compile({ metadata: { name: "restricted-everywhere" }, spec: { profile: "restricted" } });
  for (let i = 1; i < count; i++) {
    const target = i * 7919; // mostly namespaces the run never uses: they must cost nothing
    const style = i % 20 === 0 ? "notIn" : ["name", "labels", "in", "exists"][i % 4]!;
    const binding =
      style === "name"
        ? { namespaces: [`ns-${target}`] }
        : style === "labels"
          ? { namespaceSelector: { matchLabels: { [`unique-${target}`]: "yes" } } }
          : style === "in"
            ? { namespaceSelector: { matchExpressions: [{ key: `unique-${target}`, operator: "In", values: ["yes", "true"] }] } }
            : style === "exists"
              ? { namespaceSelector: { matchExpressions: [{ key: `unique-${target}`, operator: "Exists" }] } }
              : { namespaceSelector: { matchExpressions: [{ key: "env", operator: "NotIn", values: ["prod", "dev"] }] } };
    compile({ metadata: { name: `p-${i}` }, binding, spec: { metadata: { labels: { requiredKeys: ["app"] } } } });
  }
  return out;
}

function workload(): PodUnderReview {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web" },
    spec: {
      template: {
        metadata: { labels: { app: "web" }, annotations: { "container.apparmor.security.beta.kubernetes.io/web": "runtime/default" } },
        spec: {
          securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
          initContainers: [
            { name: "init", image: "registry.example.com/init:1", securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } } },
          ],
          containers: [1, 2, 3].map((n) => ({
            name: `c${n}`,
            image: `registry.example.com/app${n}:1.${n}`,
            ports: [{ containerPort: 8080 + n }],
            readinessProbe: { httpGet: { path: "/ready", port: 8080 + n } },
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] }, readOnlyRootFilesystem: true },
            volumeMounts: [{ name: "cache", mountPath: "/cache" }],
          })),
          volumes: [
            { name: "cache", emptyDir: {} },
            { name: "config", configMap: { name: "web" } },
          ],
        },
      },
    },
  };
  return podsInObject(deployment)[0]!;
}

function run(index: PodRestrictionIndex, pod: PodUnderReview, iterations: number): { ms: number; wrong: number } {
  let wrong = 0;
  const labels = Array.from({ length: NAMESPACES }, (_, i) => namespaceLabels(i));
  const started = performance.now();
  for (let i = 0; i < iterations; i++) {
    const ns = i % NAMESPACES;
    if (!decidePodRestrictions(index, pod, `ns-${ns}`, labels[ns]).allowed) wrong++;
  }
  return { ms: performance.now() - started, wrong };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const opts = options();
const profiles = profileSources(await shippedProfiles());
const pod = workload();
const indexes = new Map(SIZES.map((n) => [n, new PodRestrictionIndex(policies(n, profiles))]));

// Warm-up: every size, so the JIT sees the same code paths before measuring.
for (const index of indexes.values()) run(index, pod, Math.min(opts.iterations, 5000));

const times = new Map<number, number[]>(SIZES.map((n) => [n, []]));
let wrong = 0;
for (let round = 0; round < opts.rounds; round++) {
  for (const n of round % 2 ? [...SIZES].reverse() : SIZES) {
    const r = run(indexes.get(n)!, pod, opts.iterations);
    times.get(n)!.push(r.ms);
    wrong += r.wrong;
  }
}

const base = median(times.get(1)!);
const results = SIZES.map((n) => {
  const ms = median(times.get(n)!);
  return { policies: n, microsecondsPerDecision: (ms * 1000) / opts.iterations, ratioToOne: ms / base };
});
const worst = results[results.length - 1]!.ratioToOne;
const report = {
  iterations: opts.iterations,
  rounds: opts.rounds,
  namespaces: NAMESPACES,
  results,
  target: `1000 policies ≤ ${TARGET_RATIO}× of 1`,
  met: worst <= TARGET_RATIO,
  wrongDecisions: wrong,
};

if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
else {
  process.stdout.write(`PodRestriction evaluation (${opts.iterations} decisions × ${opts.rounds} rounds, median round, ${NAMESPACES} namespaces)\n`);
  for (const r of results)
    process.stdout.write(
      `  ${String(r.policies).padStart(5)} policies: ${r.microsecondsPerDecision.toFixed(2)} µs/decision, ${r.ratioToOne.toFixed(2)}× of 1\n`,
    );
  process.stdout.write(`  target: ${report.target} — ${report.met ? "PASS" : "FAIL"}\n`);
  if (wrong > 0) process.stdout.write(`  ${wrong} decisions were not the expected "allowed"\n`);
}
process.exit(wrong > 0 ? 1 : 0);
