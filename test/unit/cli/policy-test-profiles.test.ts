// A PolicyTest's `profiles` take the names `check --profile` and `spec.profile` take, versions included, through
// the one resolver; a wrong version is refused with the valid range, at the line of the entry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readPolicyTests } from "../../../src/cli/policy-test.ts";

async function withTest(profiles: string, run: (file: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-test-profiles-"));
  try {
    await writeFile(join(dir, "pod.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n");
    const file = join(dir, "imprimatur-test.yaml");
    await writeFile(
      file,
      `apiVersion: imprimatur.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\nprofiles: ${profiles}\nresources: [pod.yaml]\nresults: [{resource: Pod/p, result: allowed}]\n`,
    );
    await run(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test("versioned profile names are accepted as check and serve accept them", async () => {
  await withTest("[restricted@v1.25, baseline@latest]", async (file) => {
    const [t] = await readPolicyTests(file);
    assert.deepEqual(t?.profiles, ["restricted@v1.25", "baseline@latest"]);
  });
});

test("an unknown version or profile is refused with what is valid", async () => {
  await withTest("[restricted@v1.99, strict]", async (file) => {
    await assert.rejects(readPolicyTests(file), (e: Error) => {
      assert.match(e.message, /:4 \(profiles\[0\]\): profile "restricted@v1\.99": policy version v1\.99 is newer than the shipped profiles/);
      assert.match(e.message, /:4 \(profiles\[1\]\): unknown profile "strict"; shipped profiles: baseline, restricted/);
      return true;
    });
  });
});
