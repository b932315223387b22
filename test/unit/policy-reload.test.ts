// A running server picks up policy changes, and keeps the last good set when a change does not load.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PolicyLoadError } from "../../src/policy/policy-error.ts";
import type { PolicySource } from "../../src/policy/policy-source.ts";
import { postJson } from "../support/https-client.ts";
import { startTestApp } from "../support/in-process-app.ts";
import { imageReview } from "../support/admission.ts";

const policy = (action: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: only}
spec:
  rules: [{action: ${action}, images: ["nginx"]}]
  default: allow
`;

test("reload applies a good change and keeps the last good set on a bad one", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-reload-"));
  const policies = join(dir, "policies");
  await mkdir(policies);
  await writeFile(join(policies, "p.yaml"), policy("allow"));
  const { app, ca, close } = await startTestApp({ policies, stateDir: join(dir, "state") });
  try {
    const ask = async () => (await postJson(`https://127.0.0.1:${app.port}/imagereview`, ca, imageReview(["nginx:1.25"]))).body.status.allowed;
    assert.equal(await ask(), true);

    await writeFile(join(policies, "p.yaml"), policy("deny"));
    assert.equal(await app.reload(), undefined);
    assert.equal(await ask(), false, "the new policy is in force");

    await writeFile(join(policies, "p.yaml"), policy("perhaps"));
    const err = await app.reload();
    assert.ok(err instanceof PolicyLoadError);
    assert.match(err.message, /p\.yaml:5 \(document 1, spec\.rules\[0\]\.action\)/);
    assert.equal(await ask(), false, "the last good policy is still in force");
    assert.equal(app.policies()[0]?.rules[0]?.action, "deny");
  } finally {
    await close();
    await rm(dir, { recursive: true, force: true });
  }
});

test("reloads run one at a time: those asked for during a slow one wait for it and load once, the newest set last", async () => {
  let text = policy("allow");
  let reading = 0;
  let mostAtOnce = 0;
  let reads = 0;
  let gate: Promise<void> | undefined;
  const source: PolicySource = {
    description: "a slow source",
    async read() {
      const snapshot = text; // what this read sees is the text when it began
      reads++;
      mostAtOnce = Math.max(mostAtOnce, ++reading);
      try {
        await gate;
        return { texts: [{ origin: "p.yaml", text: snapshot }], errors: [] };
      } finally {
        reading--;
      }
    },
  };
  const { app, close } = await startTestApp({ policies: "(a slow source)", policySource: source });
  try {
    assert.equal(app.policies()[0]?.rules[0]?.action, "allow");
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    const first = app.reload(); // reads the old text, slowly
    await new Promise((resolve) => setImmediate(resolve));
    text = policy("deny");
    const [second, third] = [app.reload(), app.reload()];
    open();
    assert.deepEqual(await Promise.all([first, second, third]), [undefined, undefined, undefined]);
    assert.equal(mostAtOnce, 1, "no two loads at once");
    assert.equal(reads, 3, "start-up, the slow reload, and one for the two asked during it");
    assert.equal(app.policies()[0]?.rules[0]?.action, "deny", "the newest set is the one in force");
  } finally {
    await close();
  }
});

test("a change while the server starts (after its first load, before it serves) is reloaded, not lost until the next change", async () => {
  // A source that changes right after its first read, as a policy applied while a new replica starts does (its
  // workers can take seconds to start). A source of its own because no real one can be made to change at that instant.
  let text = policy("allow");
  let reads = 0;
  const listeners = new Set<() => void>();
  const source: PolicySource = {
    description: "a source that changes during start",
    async read() {
      reads++;
      const texts = [{ origin: "p.yaml", text }];
      if (reads === 1)
        setImmediate(() => {
          text = policy("deny");
          for (const changed of listeners) changed();
        });
      return { texts, errors: [] };
    },
    watch(changed) {
      listeners.add(changed);
      return { close: () => void listeners.delete(changed) };
    },
  };
  const { app, ca, close } = await startTestApp({ policies: "(a changing source)", policySource: source, watchPolicies: true });
  try {
    const ask = async () => (await postJson(`https://127.0.0.1:${app.port}/imagereview`, ca, imageReview(["nginx:1.25"]))).body.status.allowed;
    for (let i = 0; i < 100 && (await ask()) !== false; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(await ask(), false, "the change made while the server started is in force");
    assert.equal(reads, 2);
  } finally {
    await close();
  }
});
