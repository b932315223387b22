// docs/reference.md lists every rule name a denial (and so a PolicyTest expectation) can carry. This keeps it in
// step with the code: every rule name the sources write (`rule: "…"` or `rule: \`…${…}\``) must be on the page,
// and the page's checks of each shipped profile must be the profile's own.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { shippedProfiles } from "../../src/policy/profiles.ts";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { subjectOfObject } from "../../src/core/admission-subject.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { validateSubject } from "../support/engine-review.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

async function rulesSection(): Promise<string> {
  const page = await readFile(join(ROOT, "docs/reference.md"), "utf8");
  const start = page.indexOf("## Rule names");
  assert.ok(start >= 0, "docs/reference.md has a section ## Rule names");
  return page.slice(start);
}

/** The rule names the sources write, `${…}` as "*": rules[*], *.digestMutate, matchConditions[*]. */
async function ruleNamesInCode(): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const f of await readdir(join(ROOT, "src"), { recursive: true })) {
    if (!f.endsWith(".ts")) continue;
    const text = await readFile(join(ROOT, "src", f), "utf8");
    for (const m of text.matchAll(/\brule:\s*(?:"([^"]*)"|`([^`]*)`)/g)) {
      const name = m[1] ?? m[2]!.replace(/\$\{[^}]*\}/g, "*");
      if (!found.has(name)) found.set(name, `src/${f}`);
    }
  }
  return found;
}

function globMatches(glob: string, text: string): boolean {
  const pattern = glob.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".+");
  return new RegExp(`^${pattern}$`).test(text);
}

test("docs/reference.md names every rule name the code gives a violation or a pass", async () => {
  const section = await rulesSection();
  const onPage = [...section.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]!);
  const inCode = await ruleNamesInCode();
  assert.ok(inCode.size >= 15, `rule names found in the sources: ${[...inCode.keys()].join(", ")}`);
  const missing = [...inCode].filter(([name]) => !onPage.some((token) => globMatches(name, token))).map(([name, file]) => `${name} (${file})`);
  assert.deepEqual(missing, [], "rule names the page does not give");
});

test("docs/reference.md lists the checks of every shipped profile, and what it includes", async () => {
  const section = await rulesSection();
  const profiles = await shippedProfiles();
  for (const [name, profile] of profiles) {
    const row = new RegExp(`^\\| \`${name}\` +\\| (.*) \\|$`, "m").exec(section);
    assert.ok(row, `the page has a row for the profile ${name}`);
    const raw = profile.raw as { spec: { checks?: Array<{ name: string }>; profile?: string } };
    const [own, includes] = row[1]!.split(", and every check of ");
    assert.deepEqual(
      [...own!.matchAll(/`([^`]+)`/g)].map((m) => m[1]),
      (raw.spec.checks ?? []).map((c) => c.name),
      `the checks of ${name}, in the file's order`,
    );
    assert.equal(includes === undefined ? undefined : /^`([^`]+)`/.exec(includes)?.[1], raw.spec.profile, `the profile ${name} includes`);
  }
});

test("the pages' example of a PodRestriction rule name is the one a denial carries", async () => {
  // The first example of docs/pod-restrictions.md, against a pod whose second container is privileged.
  const policy = `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: { name: no-privileged }
spec:
  spec:
    containers:
      - securityContext:
          privileged: { allowNil: true, require: false }
`;
  const engine = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsePolicyText(policy, "p.yaml").policies, offline: true });
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "default" },
    spec: {
      containers: [
        { name: "a", image: "a.example/a:1" },
        { name: "b", image: "a.example/b:1", securityContext: { privileged: true } },
      ],
    },
  });
  assert.ok(plan.review);
  const decision = await validateSubject(engine, plan.subject, { endpoint: "check", deadline: Date.now() + 10_000, dryRun: true });
  await engine.close();
  assert.deepEqual(
    decision.violations.map((v) => [v.rule, v.field]),
    [["spec.spec.containers[0].securityContext.privileged", "spec.containers[1].securityContext.privileged"]],
  );
  const rule = decision.violations[0]!.rule;
  for (const page of ["docs/reference.md", "docs/policy-tests.md"])
    assert.ok((await readFile(join(ROOT, page), "utf8")).includes(`\`${rule}\``), `${page} gives the rule name as a denial carries it: ${rule}`);
});
