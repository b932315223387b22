// The audit record of an override names the digests that were verified, not only the references the pod wrote:
// a fail-open admission of one image next to a verified one says exactly what was verified.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { AuditLog } from "../../../src/audit/audit-log.ts";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import { allow } from "../../../src/core/decision.ts";
import { recordOverrides } from "../../../src/engine/audit-overrides.ts";

test("a fail-open record names the verified images' digests next to the references", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-audit-"));
  const audit = new AuditLog(join(dir, "audit.jsonl"));
  try {
    const signed = "registry.example.com/app:1.0";
    const unreachable = "registry.example.com/other:2.0";
    const plan = subjectOfObject({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "shop" },
      spec: {
        containers: [
          { name: "a", image: signed },
          { name: "b", image: unreachable },
        ],
      },
    });
    assert.ok(plan.review);
    const digest = `sha256:${"b".repeat(64)}`;
    const decision = allow({
      auditAnnotations: { "verified-images": JSON.stringify({ [`${signed}@${digest}`]: { digest, signers: ["key sha256:01"] } }) },
      failOpen: [{ backend: "registry/registry.example.com", error: `${unreachable}: timeout` }],
    });
    const call = { endpoint: "validate" as const, deadline: Date.now() + 1000, dryRun: false };
    const out = await recordOverrides(audit, pino({ level: "silent" }), decision, plan.subject, call, [signed, unreachable]);
    assert.equal(out.allowed, true);
    const [record] = (await readFile(join(dir, "audit.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.equal(record.event, "fail-open");
    assert.deepEqual(record.images, [signed, unreachable]);
    assert.deepEqual(record.verifiedImages, { [`${signed}@${digest}`]: { digest, signers: ["key sha256:01"] } });
  } finally {
    await audit.close();
    await rm(dir, { recursive: true, force: true });
  }
});
