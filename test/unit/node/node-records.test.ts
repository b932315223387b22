// `imprimatur node-records` (src/cli/node-records.ts) on state folders the record store writes: what it says about
// the first start's snapshot of preloaded images. Run in this process with its standard output captured (the
// command is only that output and an exit status), so mutation testing of the record store reaches it.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { recordPull } from "../../../src/core/pull-verification/pull-records.ts";
import { RecordStore } from "../../../src/node/record-store.ts";
import { runNodeRecords } from "../../../src/cli/node-records.ts";

const REPO = "registry.example.com/base/os";
let dir: string;

beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), "imprimatur-node-records-")), "state");
});
afterEach(async () => {
  await rm(join(dir, ".."), { recursive: true, force: true });
});

async function run(args: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = "";
  const write = process.stdout.write;
  process.stdout.write = ((chunk: string | Uint8Array) => {
    stdout += chunk.toString();
    return true;
  }) as typeof process.stdout.write;
  try {
    return { code: await runNodeRecords(args), stdout };
  } finally {
    process.stdout.write = write;
  }
}

async function records(): Promise<{ code: number; text: string; json: any }> {
  const text = await run(["--state-dir", dir]);
  const json = await run(["--state-dir", dir, "-o", "json"]);
  return { code: text.code, text: text.stdout, json: JSON.parse(json.stdout) };
}

describe("node-records: the preloaded-image snapshot", () => {
  test("not taken yet after a start that failed before it; taken, with its time, after the first start", async () => {
    const store = await RecordStore.open(dir);
    let listed = await records();
    assert.equal(listed.code, 0);
    assert.match(listed.text, /preloaded-image snapshot: not taken yet/);
    assert.equal(listed.json.summary.snapshot, "due");
    await store.writePreloaded([{ imageRef: "sha256:base", repositories: [REPO] }]);
    listed = await records();
    assert.match(listed.text, /preloaded-image snapshot: taken at the first start \(\d{4}-\d\d-\d\dT/);
    assert.match(listed.text, new RegExp(`sha256:base ${REPO}: preloaded`));
    assert.equal(listed.json.summary.snapshot, "taken");
    assert.ok(!Number.isNaN(Date.parse(listed.json.summary.snapshotTime)));
  });

  test("records without it: a warning that no image counts as preloaded", async () => {
    const store = await RecordStore.open(dir);
    await store.update("sha256:app", () => recordPull(undefined, "sha256:app", REPO, undefined, new Date()));
    const listed = await records();
    assert.equal(listed.code, 0, "every record is readable");
    assert.match(listed.text, /warning: no preloaded-image snapshot.*no image counts as preloaded/);
    assert.equal(listed.json.summary.snapshot, "missing");
    assert.equal(listed.json.summary.snapshotTime, undefined);
  });
});

describe("node-records: a folder that is not a state folder", () => {
  async function failing(stateDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
    let stderr = "";
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string | Uint8Array) => {
      stderr += chunk.toString();
      return true;
    }) as typeof process.stderr.write;
    try {
      return { ...(await run(["--state-dir", stateDir])), stderr };
    } finally {
      process.stderr.write = write;
    }
  }

  test("missing, empty, a file, or without records: one line naming it and why, exit 2, nothing on standard output", async () => {
    const parent = join(dir, "..");
    const cases: Array<[string, () => Promise<unknown>, string]> = [
      [dir, async () => undefined, `no state folder at ${dir}: it does not exist (has the node proxy run with this --state-dir?)`],
      [dir, () => mkdir(dir), `the state folder ${dir} is empty: the node proxy has not started with this --state-dir yet`],
      [join(parent, "file"), () => writeFile(join(parent, "file"), "x"), `${join(parent, "file")} is a file, not the node proxy's state folder`],
      [parent, async () => undefined, `${parent} is not the node proxy's state folder: it has no pulled/ folder of records`],
    ];
    for (const [stateDir, prepare, message] of cases) {
      await prepare();
      const r = await failing(stateDir);
      assert.equal(r.code, 2, message);
      assert.equal(r.stdout, "");
      assert.equal(r.stderr, `imprimatur node-records: ${message}\n`);
    }
  });
});
