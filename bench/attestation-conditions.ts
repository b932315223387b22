// What attestation checks cost per admission once the statements are cached: the engine's /validate path
// (Engine.validate, in-process, no HTTP) for a pod whose image needs a verified SLSA statement, checked with 10
// JMESPath conditions, with 10 CEL expressions doing the same, and with no checks at all (the signature alone),
// measured side by side in alternating rounds. The verifier's cache is filled first, as a running server's would
// be, so only the per-admission work is timed. Each check is timed twice: judged on every admission (each names
// the image by another tag of the same digest, so the verification is a cache hit but the judgement, kept per
// image name, is not), and with its judgement kept from the first admission (the same name every time).
//
//   node bench/attestation-conditions.ts [--admissions 20000] [--rounds 5] [--json]
//
// Exit 0 when every admission was allowed, 1 otherwise, 2 on usage.
import { generateKeyPairSync } from "node:crypto";
import { cpus } from "node:os";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { DEFAULT_SERVER_CONFIG } from "../src/config/server-config.ts";
import { subjectOfObject } from "../src/core/admission-subject.ts";
import { Engine } from "../src/engine/engine.ts";
import { buildEngine } from "../src/engine/engine-builder.ts";
import type { DeferredImageVerifier } from "../src/verification/deferred-verifier.ts";
import { parsePolicyText } from "../src/policy/load-policies.ts";
import { renderTable } from "./support/report.ts";

const SLSA = "https://slsa.dev/provenance/v1";
const DIGEST = `sha256:${"a".repeat(64)}`;
const IMAGE = `registry.example.com/app:1.0@${DIGEST}`;
/** Tags of the one digest that admissions judged anew cycle through (more than a result keeps judgements for). */
const TAGS = 1_000;
const PEM = JSON.stringify(generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString());

const PREDICATE = {
  buildDefinition: {
    buildType: "https://actions.github.io/buildtypes/workflow/v1",
    externalParameters: { workflow: { ref: "refs/tags/v1", repository: "https://github.com/acme/app" } },
  },
  runDetails: {
    builder: { id: "https://github.com/actions/runner" },
    metadata: { invocationId: "run-1", startedOn: new Date(Date.now() - 3600e3).toISOString() },
  },
};

/** Ten checks of the same facts, written as JMESPath conditions or as CEL expressions. */
const CHECKS: Array<[jmespath: string, operator: string, value: unknown, cel: string]> = [
  [
    "buildDefinition.buildType",
    "Equals",
    "https://actions.github.io/buildtypes/workflow/v1",
    "predicate.buildDefinition.buildType == 'https://actions.github.io/buildtypes/workflow/v1'",
  ],
  ["runDetails.builder.id", "In", ["https://github.com/actions/runner"], "predicate.runDetails.builder.id in ['https://github.com/actions/runner']"],
  ["buildDefinition.externalParameters.workflow.ref", "Equals", "refs/tags/v1", "predicate.buildDefinition.externalParameters.workflow.ref == 'refs/tags/v1'"],
  [
    "buildDefinition.externalParameters.workflow.repository",
    "Equals",
    "https://github.com/acme/app",
    "predicate.buildDefinition.externalParameters.workflow.repository == 'https://github.com/acme/app'",
  ],
  ["runDetails.metadata.invocationId", "NotEquals", "", "predicate.runDetails.metadata.invocationId != ''"],
  ["length(runDetails.metadata.invocationId)", "GreaterThan", 0, "size(predicate.runDetails.metadata.invocationId) > 0"],
  ["starts_with(buildDefinition.buildType, 'https://')", "Equals", true, "predicate.buildDefinition.buildType.startsWith('https://')"],
  ["contains(runDetails.builder.id, 'github')", "Equals", true, "predicate.runDetails.builder.id.contains('github')"],
  ["keys(buildDefinition) | length(@)", "GreaterThanOrEquals", 2, "size(predicate.buildDefinition) >= 2"],
  ["runDetails.builder.id", "NotIn", ["https://evil.example/runner"], "!(predicate.runDetails.builder.id in ['https://evil.example/runner'])"],
];

function policy(kind: "jmespath" | "cel" | "none"): string {
  const attestation =
    kind === "none"
      ? ""
      : kind === "jmespath"
        ? `      attestations:\n        - predicateType: ${SLSA}\n          conditions:\n            - all:\n${CHECKS.map(([k, op, v]) => `                - {key: ${JSON.stringify(`{{ ${k} }}`)}, operator: ${op}, value: ${JSON.stringify(v)}}`).join("\n")}\n`
        : `      attestations:\n        - predicateType: ${SLSA}\n          cel: ${JSON.stringify(CHECKS.map((c) => `(${c[3]})`).join(" && "))}\n`;
  return `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: p}\nspec:\n  rules:\n    - action: allow\n      images: ["registry.example.com/*"]\n      attestors: [{entries: [{staticKey: {ignoreTlog: true, key: ${PEM}}}]}]\n${attestation}`;
}

/** The rule's one key entry, as the verifier reports the signer that satisfied it. */
const SIGNER = { entry: "attestors[0].entries[0]", attestor: "key", signer: "key sha256:00", format: "cosign-signature" };

async function engineFor(kind: "jmespath" | "cel" | "none"): Promise<Engine> {
  const parsed = parsePolicyText(policy(kind), `${kind}.yaml`);
  if (parsed.errors.length > 0) throw new Error(parsed.errors.map((e) => `${e.path}: ${e.message}`).join("; "));
  const engine = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies });
  const result = {
    status: "verified",
    evidence: [SIGNER],
    ...(kind === "none"
      ? {}
      : {
          attestations: [
            {
              index: 0,
              predicateType: SLSA,
              statements: [{ statement: { predicateType: SLSA, predicate: PREDICATE }, signers: [{ ...SIGNER, format: "cosign-attestation" }] }],
              failures: [],
            },
          ],
        }),
  };
  // A running server's first admission of the image verifies it and caches the result; here the verification
  // itself (registry, signatures) is replaced by its result, and the verifier's own code caches it, so the key
  // is the one every later admission looks up. Stubbed once: a second verification fails the run.
  const verifier = (await (engine.verifier as DeferredImageVerifier).loaded()) as unknown as { run: () => Promise<unknown> };
  let runs = 0;
  verifier.run = async () => {
    if (++runs > 1) throw new Error("the verifier's cache missed: an admission verified again");
    return result;
  };
  return engine;
}

/** After the warm-up every engine has verified once and answers from its cache. */
async function assertCached(engines: Record<string, Engine>): Promise<void> {
  for (const [kind, engine] of Object.entries(engines)) {
    const counts = await (engine.verifier as DeferredImageVerifier).loaded();
    if (counts.verifications !== 1 || counts.hits === 0)
      throw new Error(`${kind}: ${counts.verifications} verifications and ${counts.hits} cache hits after the warm-up; want 1 and more than 0`);
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { admissions: { type: "string", default: "20000" }, rounds: { type: "string", default: "5" }, json: { type: "boolean", default: false } },
  });
  const admissions = Number(values.admissions);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(admissions) || admissions < 100 || !Number.isInteger(rounds) || rounds < 1) {
    process.stderr.write("usage: node bench/attestation-conditions.ts [--admissions N>=100] [--rounds N>=1] [--json]\n");
    return 2;
  }
  const subjectOf = (image: string) => {
    const plan = subjectOfObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "shop" }, spec: { containers: [{ name: "a", image }] } });
    if (!plan.review) throw new Error("not reviewed");
    return { kind: "subject" as const, subject: plan.subject };
  };
  const kept = subjectOf(IMAGE);
  const anew = Array.from({ length: TAGS }, (_, i) => subjectOf(`registry.example.com/app:t${i}@${DIGEST}`));
  const kinds = ["none", "jmespath", "cel"] as const;
  const engines = Object.fromEntries(await Promise.all(kinds.map(async (k) => [k, await engineFor(k)] as const))) as Record<(typeof kinds)[number], Engine>;
  // Each variant: an engine, and whether its admissions name the image the same way (judgement kept) or not.
  const variants = [
    { name: "none", kind: "none", keep: false },
    { name: "jmespath", kind: "jmespath", keep: false },
    { name: "cel", kind: "cel", keep: false },
    { name: "jmespathKept", kind: "jmespath", keep: true },
    { name: "celKept", kind: "cel", keep: true },
  ] as const;
  const call = { endpoint: "validate" as const, deadline: Date.now() + 3600e3, dryRun: true };
  const perRound: Record<string, number[]> = Object.fromEntries(variants.map((v) => [v.name, []]));
  let denied = 0;
  const admit = async (v: (typeof variants)[number], i: number) => {
    if ((await engines[v.kind].review(v.keep ? kept : anew[i % TAGS]!, call)).decision?.allowed !== true) denied++;
  };
  for (const v of variants) for (let i = 0; i < 2000; i++) await admit(v, i); // warm-up
  await assertCached(engines);
  for (let r = 0; r < rounds; r++) {
    for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
      const t0 = performance.now();
      for (let i = 0; i < admissions; i++) await admit(v, i);
      perRound[v.name]!.push(((performance.now() - t0) * 1000) / admissions);
    }
  }
  for (const e of Object.values(engines)) await e.close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const report = {
    benchmark: "attestation-conditions",
    date: new Date().toISOString(),
    node: process.version,
    cpuModel: cpus()[0]?.model ?? "unknown",
    admissionsPerRound: admissions,
    rounds,
    microsecondsPerAdmission: {
      signatureOnly: median(perRound.none!),
      jmespath10: median(perRound.jmespath!),
      cel10: median(perRound.cel!),
      jmespath10Kept: median(perRound.jmespathKept!),
      cel10Kept: median(perRound.celKept!),
    },
    denied,
  };
  if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else
    process.stdout.write(
      `\nattestation-conditions  ${report.date}  node ${report.node}  (${report.cpuModel})\n\n` +
        renderTable([
          ["admission (cached verification)", "µs per admission (median of rounds)"],
          ["signature only, no attestation check", report.microsecondsPerAdmission.signatureOnly.toFixed(1)],
          ["+ SLSA statement, 10 JMESPath conditions", report.microsecondsPerAdmission.jmespath10.toFixed(1)],
          ["+ SLSA statement, the same 10 checks in CEL", report.microsecondsPerAdmission.cel10.toFixed(1)],
          ["+ SLSA statement, 10 JMESPath conditions, judgement kept", report.microsecondsPerAdmission.jmespath10Kept.toFixed(1)],
          ["+ SLSA statement, 10 checks in CEL, judgement kept", report.microsecondsPerAdmission.cel10Kept.toFixed(1)],
        ]) +
        `\n${denied === 0 ? "every admission allowed" : `FAILED: ${denied} admissions denied`}\n`,
    );
  return denied === 0 ? 0 : 1;
}

process.exitCode = await main();
