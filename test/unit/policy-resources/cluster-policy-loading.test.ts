// Loading other clusters' own policy resources while serving (src/policy-resources/cluster-policy-resources.ts): a cluster whose
// resources cannot be read stops startup naming it; a change reloads that cluster alone; a set that fails to load
// keeps the cluster's last good one. The sources here stand in for the API watch (a fake: the watch itself is
// tested against a real apiserver in test/unit/policy-resources.test.ts and test/e2e/cluster-reads.test.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import pino from "pino";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import { emptyPolicySet } from "../../../src/core/policy-set/policy-kinds.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { NO_RECORDER } from "../../../src/engine/recorder.ts";
import type { PolicyError } from "../../../src/policy/policy-error.ts";
import type { PolicySource, PolicyText } from "../../../src/policy/policy-source.ts";
import { ClusterPoliciesError, startClusterPolicies } from "../../../src/policy-resources/cluster-policy-resources.ts";
import { validateSubject } from "../../support/engine-review.ts";

const denying = (image: string) =>
  `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: own}\nspec:\n  rules: [{action: deny, images: ["${image}"]}]\n  default: allow\n`;

/** A source whose text the test sets, and whose watch it fires. */
class ScriptedSource implements PolicySource {
  readonly description = "scripted";
  text: string;
  failRead: Error | undefined;
  outcomes: Array<readonly PolicyError[]> = [];
  private changed: (() => void) | undefined;
  constructor(text: string) {
    this.text = text;
  }
  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    if (this.failRead) throw this.failRead;
    return { texts: [{ origin: "k8s:ImagePolicy/own", text: this.text, locations: false }], errors: [] };
  }
  watch(changed: () => void): { close(): void } {
    this.changed = changed;
    return { close: () => (this.changed = undefined) };
  }
  loaded(outcome: { errors: readonly PolicyError[] }): void {
    this.outcomes.push(outcome.errors);
  }
  fire(): void {
    this.changed?.();
  }
}

async function engineWith(): Promise<Engine> {
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: emptyPolicySet(), offline: true });
}

async function denied(engine: Engine, image: string, cluster: string): Promise<string[]> {
  const plan = subjectOfObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "apps" }, spec: { containers: [{ name: "c", image }] } });
  assert.ok(plan.review);
  const call = { endpoint: "validate" as const, deadline: Date.now() + 10_000, dryRun: true, caller: { authentication: "token" as const, name: "x", cluster } };
  return (await validateSubject(engine, plan.subject, call)).violations.map((v) => v.policy);
}

async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

const quiet = { logger: pino({ level: "silent" }), recorder: NO_RECORDER, watch: true };

test("a cluster whose policy resources cannot be read stops startup, naming the flag and the cluster", async () => {
  const engine = await engineWith();
  const good = new ScriptedSource(denying("*/a*"));
  const broken = new ScriptedSource("");
  broken.failRead = new Error("cannot list the policy custom resources: imagepolicies: 404");
  await assert.rejects(
    startClusterPolicies(
      new Map([
        ["good", good],
        ["broken", broken],
      ]),
      { ...quiet, engine },
    ),
    (e: Error) => {
      assert.match(
        String(e),
        /^ClusterPoliciesError: --cluster-kubeconfig broken: its policy resources \(--policy-crds\): cannot list the policy custom resources: imagepolicies: 404$/,
      );
      assert.equal((e as ClusterPoliciesError).code, "load-failed");
      assert.equal(e.cause, broken.failRead);
      return true;
    },
  );
  await engine.close();
});

test("each cluster loads and reloads its own set; one that fails to load keeps its last good set, with its status told", async () => {
  const engine = await engineWith();
  const b = new ScriptedSource(denying("*/first*"));
  const c = new ScriptedSource(denying("*/other*"));
  const running = await startClusterPolicies(
    new Map([
      ["cluster-b", b],
      ["cluster-c", c],
    ]),
    { ...quiet, engine },
  );
  assert.deepEqual(await denied(engine, "r.example/first:1", "cluster-b"), ["cluster-b:own"]);
  assert.deepEqual(await denied(engine, "r.example/first:1", "cluster-c"), []);
  assert.deepEqual(b.outcomes, [[]], "the load's outcome is told to the source (its status)");

  b.text = denying("*/second*");
  b.fire();
  await until(async () => (await denied(engine, "r.example/second:1", "cluster-b")).length > 0);
  assert.deepEqual(await denied(engine, "r.example/first:1", "cluster-b"), []);
  assert.deepEqual(await denied(engine, "r.example/other:1", "cluster-c"), ["cluster-c:own"], "cluster-c is untouched");

  b.text = "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: own}\nspec: {rules: 7}\n";
  b.fire();
  await until(async () => b.outcomes.length === 3);
  assert.notDeepEqual(b.outcomes[2], [], "the failed load is told to the source");
  assert.deepEqual(await denied(engine, "r.example/second:1", "cluster-b"), ["cluster-b:own"], "the last good set stays");

  running.close();
  b.text = denying("*/third*");
  b.fire();
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(await denied(engine, "r.example/third:1", "cluster-b"), [], "closed: no more reloads");
  await engine.close();
});

test("a change while a cluster's first set loads is reloaded once it is in, not lost until the next change", async () => {
  const engine = await engineWith();
  const source = new ScriptedSource(denying("*/first*"));
  // The change comes while the first read is under way: after it read the first text, before it was compiled.
  const read = source.read.bind(source);
  let reads = 0;
  source.read = async () => {
    const answer = await read();
    if (++reads === 1) {
      source.text = denying("*/second*");
      source.fire();
    }
    return answer;
  };
  const running = await startClusterPolicies(new Map([["b", source]]), { ...quiet, engine });
  await until(async () => (await denied(engine, "registry.example/second:1", "b")).length === 1);
  assert.deepEqual(await denied(engine, "registry.example/first:1", "b"), []);
  assert.equal(reads, 2);
  running.close();
  await engine.close();
});
