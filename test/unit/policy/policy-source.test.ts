// The files a policy in a folder may read next to itself (src/policy/policy-source.ts): inside the folder, relative
// and small; anything else is refused by code with the reason.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { PolicyFolder } from "../../../src/policy/policy-source.ts";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-policy-source-"));
  await mkdir(join(dir, "policies", "keys"), { recursive: true });
  await writeFile(join(dir, "policies", "policy.yaml"), "kind: ImagePolicy\n");
  await writeFile(join(dir, "policies", "keys", "release.pub"), "PEM");
  await writeFile(join(dir, "policies", "keys", "huge.pub"), Buffer.alloc(1024 * 1024 + 1));
  await writeFile(join(dir, "outside.pub"), "PEM");
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("a policy reads files next to it, and is refused by code an absolute path, one outside the folder, or a large file", async () => {
  const folder = new PolicyFolder(join(dir, "policies"));
  const { texts, errors } = await folder.read();
  assert.deepEqual(errors, []);
  const related = texts[0]!.related!;
  assert.equal(related("keys/release.pub"), "PEM");
  assert.throws(() => related(join(dir, "outside.pub")), {
    name: "RelatedFileError",
    code: "absolute-path",
    message: "must be a path relative to the policy file",
  });
  assert.throws(() => related("../outside.pub"), {
    name: "RelatedFileError",
    code: "outside-folder",
    message: `it is outside the policy folder ${join(dir, "policies")}`,
  });
  assert.throws(() => related("keys/huge.pub"), {
    name: "RelatedFileError",
    code: "too-large",
    message: `it is ${1024 * 1024 + 1} bytes; the limit is ${1024 * 1024}`,
  });
});
