// kill -9 of `imprimatur serve` while it reloads its policies (SIGHUP after each change of the file), at a moment
// that varies from round to round: a reload writes nothing but the webhook configuration files, each replaced
// whole (write-file-atomic.ts), so whatever moment the kill hits, every file in the state folder reads whole; the
// restart removes the temporary files a kill left, starts with the policies on disk, and writes the files they need.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parse } from "yaml";
import { podReview } from "../support/admission.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur } from "../support/imprimatur-process.ts";

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-reload-crash-"));
});
after(() => rm(root, { recursive: true, force: true }));

/** Variant n: its own message, and imagePaths on a kind of its own, so that each reload rewrites the webhook files. */
function policy(n: number): string {
  return `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: blocked}
spec:
  rules: [{action: deny, images: ["registry.example.com/blocked/*"], message: "variant ${n}"}]
  default: allow
  imagePaths: [{kinds: ["example.com/v1/Kind${n % 2 === 0 ? "Even" : "Odd"}"], path: "{{ spec.steps[*] }}"}]
`;
}

test("kill -9 during policy reloads: every file in the state folder reads whole; the restart serves the policies on disk", { timeout: 240_000 }, async () => {
  const ROUNDS = 6;
  let leftBehind = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const dir = join(root, `round-${round}`);
    const policies = join(dir, "policies");
    const stateDir = join(dir, "state");
    await mkdir(policies, { recursive: true });
    await mkdir(stateDir);
    let variant = 0;
    await writeFile(join(policies, "p.yaml"), policy(variant));
    const args = ["--policies", policies];
    const victim = await startImprimatur(args, { stateDir });
    // Reloads one after another; the kill comes after a few, a few milliseconds later each round.
    for (let reload = 0; reload < 3 + (round % 3); reload++) {
      await writeFile(join(policies, "p.yaml"), policy(++variant));
      process.kill(victim.pid, "SIGHUP");
      await new Promise((r) => setTimeout(r, 20));
    }
    await writeFile(join(policies, "p.yaml"), policy(++variant));
    process.kill(victim.pid, "SIGHUP");
    await new Promise((r) => setTimeout(r, round * 2));
    process.kill(victim.pid, "SIGKILL");
    await victim.stop();

    // Whatever the kill hit: each configuration file is whole.
    const names = await readdir(stateDir);
    for (const name of names.filter((n) => n.endsWith(".yaml"))) {
      const text = await readFile(join(stateDir, name), "utf8");
      assert.doesNotThrow(() => parse(text), `round ${round}: ${name} reads whole`);
      assert.match(text, /^(apiVersion|#)/m, `round ${round}: ${name}`);
    }
    leftBehind += names.filter((n) => n.endsWith(".tmp")).length;

    // The restart: the policies on disk, the files they need, nothing unfinished left.
    const restarted = await startImprimatur(args, { stateDir });
    try {
      const res = await postJson(`${restarted.baseUrl}/validate`, restarted.ca, podReview({ images: ["registry.example.com/blocked/app:1"] }));
      assert.equal(res.body.response.allowed, false, res.text);
      assert.match(res.body.response.status.message, new RegExp(`variant ${variant}\\b`), `round ${round}: the policy on disk`);
      // Written once serving (the server is ready a moment before): the rules the policy on disk needs.
      const needed = new RegExp(`kind${variant % 2 === 0 ? "even" : "odd"}s`);
      for (let i = 0; !needed.test(await readFile(join(stateDir, "validating-webhook.yaml"), "utf8")); i++) {
        assert.ok(i < 100, `round ${round}: the rules the policy on disk needs`);
        await new Promise((r) => setTimeout(r, 100));
      }
      // The killed process's unfinished files are gone; the restarted one may be writing its own (their names hold
      // the writer's pid).
      assert.deepEqual(
        (await readdir(stateDir)).filter((n) => n.endsWith(".tmp") && n.includes(`.${victim.pid}.`)),
        [],
        `round ${round}: no unfinished file of the killed process left`,
      );
      if (names.some((n) => n.endsWith(".tmp"))) assert.match(await restarted.log(), /removed \d+ unfinished file\(s\) left in .* by a previous run/);
    } finally {
      await restarted.stop();
    }
  }
  // Not asserted (the kill may miss every write), only reported: how often it hit one.
  process.stdout.write(`# temporary files left by ${ROUNDS} kills: ${leftBehind}\n`);
});
