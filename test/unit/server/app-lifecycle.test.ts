// The server's life: it refuses an empty policy set unless told otherwise, drains on stop (/readyz 503 while
// requests are still answered, then the listener closes), refuses a CREATE without its object, and logs each
// decision with who asked for what.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { EMBEDDED_POLICIES } from "../../../src/cli/args.ts";
import { EmptyPolicySetError } from "../../../src/server/app.ts";
import { getText, postJson } from "../../support/https-client.ts";
import { startTestApp } from "../../support/in-process-app.ts";
import { podReview } from "../../support/admission.ts";

test("an empty policy folder is refused; --allow-empty-policies starts with a warning", async () => {
  const empty = await mkdtemp(join(tmpdir(), "imprimatur-empty-"));
  try {
    await assert.rejects(startTestApp({ policies: empty }), (e: unknown) => e instanceof EmptyPolicySetError && /--allow-empty\b/.test((e as Error).message));
    const lines: string[] = [];
    const logger = pino({ level: "info" }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
    const app = await startTestApp({ policies: empty, allowEmptyPolicies: true, logger });
    try {
      assert.ok(
        lines.some((l) => /"level":40/.test(l) && /no policy is loaded/.test(l)),
        lines.join(""),
      );
      const res = await postJson(`${app.base}/validate`, app.ca, podReview({ images: ["nginx"] }));
      assert.equal(res.body.response.allowed, true);
    } finally {
      await app.close();
    }
  } finally {
    await rm(empty, { recursive: true, force: true });
  }
});

test("stopping drains: /readyz is 503 at once, admissions are still answered, then the listener closes", async () => {
  const app = await startTestApp({ policies: EMBEDDED_POLICIES });
  assert.equal((await getText(`${app.base}/readyz`, app.ca)).status, 200);
  const closing = app.app.close(600);
  await new Promise((r) => setTimeout(r, 100));
  const ready = await getText(`${app.base}/readyz`, app.ca);
  assert.equal(ready.status, 503);
  assert.match(ready.text, /shutting down/);
  const res = await postJson(`${app.base}/validate`, app.ca, podReview({ images: ["registry.example.com/app:1"] }));
  assert.equal(res.body.response.allowed, true);
  await closing;
  await assert.rejects(getText(`${app.base}/readyz`, app.ca), /ECONNREFUSED/);
  await rm(app.stateDir, { recursive: true, force: true });
});

test("a CREATE without its object is a 400, not an ambiguous answer; each decision is logged with who asked for what", async () => {
  const lines: string[] = [];
  const logger = pino({ level: "info" }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  const app = await startTestApp({ policies: EMBEDDED_POLICIES, logger });
  try {
    const review = podReview({ images: ["nginx"] });
    const bad = structuredClone(review) as { request: { object: unknown } };
    bad.request.object = null;
    const res = await postJson(`${app.base}/validate`, app.ca, bad);
    assert.equal(res.status, 400);
    assert.match(res.body.message, /request\.object must be an object for operation CREATE/);

    const denied = await postJson(`${app.base}/validate`, app.ca, review);
    assert.equal(denied.body.response.allowed, false);
    const line = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "denied");
    assert.ok(line, lines.join(""));
    assert.deepEqual([line.endpoint, line.namespace, line.kind, line.name, line.user], ["validate", "default", "Pod", "p", "alice"]);
    assert.equal(line.violations[0].image, "nginx");
  } finally {
    await app.close();
  }
});
