// The suite's teardown guarantees (test/support/teardown.ts, test-file-guard.ts, scripts/run-tests.sh): a harness
// whose stop() throws or hangs does not keep the others running, the failure is reported, and the test file's
// process ends with no child left behind. The fixtures run under the suite's own runner script and flags.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { teardown } from "../../support/teardown.ts";

describe("teardown()", () => {
  test("runs every step after one that throws, one that rejects and one that hangs, then reports all three", async () => {
    const ran: string[] = [];
    const error = await teardown(
      [
        function clusterStop() {
          ran.push("cluster");
          throw new Error("rmdir k8s.io: EBUSY");
        },
        undefined,
        async function serverStop() {
          ran.push("server");
          throw new Error("server gone");
        },
        function hangingStop() {
          ran.push("hanging");
          return new Promise(() => {});
        },
        () => void ran.push("registry"),
      ],
      { stepTimeoutMs: 200 },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.deepEqual(ran, ["cluster", "server", "hanging", "registry"]);
    assert.ok(error instanceof AggregateError);
    assert.equal(error.errors.length, 3);
    assert.match(error.message, /step 1 clusterStop failed: rmdir k8s.io: EBUSY/);
    assert.match(error.message, /step 3 serverStop failed: server gone/);
    assert.match(error.message, /step 4 hangingStop failed: did not finish within 200 ms/);
  });

  test("resolves when every step succeeds, skipping components never started", async () => {
    const ran: number[] = [];
    await teardown([() => ran.push(1), null, false, async () => ran.push(2)]);
    assert.deepEqual(ran, [1, 2]);
  });
});

describe("a test file whose harness fails to stop", () => {
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-teardown-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const repo = resolve(import.meta.dirname, "../../..");
  const teardownUrl = pathToFileURL(join(repo, "test/support/teardown.ts")).href;

  /** A test file with a registry-like child that would keep its process alive, and a given after hook. */
  function fixture(name: string, afterHook: string): string {
    const file = join(dir, `${name}.test.ts`);
    writeFileSync(
      file,
      `import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { after, test } from "node:test";
import { teardown } from ${JSON.stringify(teardownUrl)};
const registry = spawn("sleep", ["600"], { stdio: ["ignore", "pipe", "pipe"] });
writeFileSync(${JSON.stringify(join(dir, `${name}.pid`))}, String(registry.pid));
const cluster = { stop: async () => { throw new Error("small cluster cleanup incomplete: rmdir EBUSY"); } };
const marker = ${JSON.stringify(join(dir, `${name}.second-step`))};
test("the test itself passes", () => {});
after(async () => { ${afterHook} });
`,
    );
    return file;
  }

  /** Runs the file as the suite does; resolves with its exit code and output. */
  function runAsTheSuiteDoes(file: string): Promise<{ code: number | null; output: string }> {
    return new Promise((done) => {
      const child = spawn("bash", [join(repo, "scripts/run-tests.sh"), file], {
        // Without NODE_TEST_CONTEXT, which would make the inner runner think it runs inside this file's tests.
        env: { ...withoutTestContext(process.env), IMPRIMATUR_TEST_TIMEOUT_MS: "4000" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      child.stdout.on("data", (c: Buffer) => (output += c.toString()));
      child.stderr.on("data", (c: Buffer) => (output += c.toString()));
      child.on("close", (code) => done({ code, output }));
    });
  }

  const withoutTestContext = ({ NODE_TEST_CONTEXT: _, ...env }: NodeJS.ProcessEnv) => env;

  /** Running, not a zombie waiting to be reaped (its parent, the fixture's process, is gone). */
  const alive = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
    } catch {
      return false;
    }
  };

  test("stop() throws: the next step still runs, the failure is printed, the run ends and the child is killed", { timeout: 60_000 }, async () => {
    const file = fixture("throws", `await teardown([() => cluster.stop(), () => writeFileSync(marker, "ran")]);`);
    const { code, output } = await runAsTheSuiteDoes(file);
    assert.notEqual(code, 0, output);
    assert.match(output, /small cluster cleanup incomplete: rmdir EBUSY/);
    assert.ok(existsSync(join(dir, "throws.second-step")), "the step after the throwing one ran");
    const pid = Number(readFileSync(join(dir, "throws.pid"), "utf8"));
    assert.equal(alive(pid), false, `the registry-like child ${pid} is gone`);
    assert.match(
      output,
      new RegExp(`\\[test-file-guard\\] throws\\.test\\.ts ended with 1 child process\\(es\\) still running; killed: ${pid} \\(sleep 600\\)`),
    );
  });

  test("an after hook that hangs: the file is ended at the hook's time limit and reported", { timeout: 60_000 }, async () => {
    const file = fixture("hangs", `await new Promise(() => {});`);
    const { code, output } = await runAsTheSuiteDoes(file);
    assert.notEqual(code, 0, output);
    assert.match(output, /timed out after 4000ms/);
    const pid = Number(readFileSync(join(dir, "hangs.pid"), "utf8"));
    assert.equal(alive(pid), false, `the registry-like child ${pid} is gone`);
  });

  test("every test of a file is reported, however soon the file's process is ended after them", { timeout: 120_000 }, async () => {
    // --test-force-exit ends the process once its tests are done; the results must all have reached the runner.
    const file = join(dir, "many.test.ts");
    const longName = "of a file with many, each named at some length so that the results fill the pipe " + "x".repeat(40);
    writeFileSync(file, `import { test } from "node:test";\nfor (let i = 0; i < 400; i++) test("test " + i + " ${longName}", () => {});\n`);
    for (let run = 0; run < 3; run++) {
      const { code, output } = await runAsTheSuiteDoes(file);
      assert.equal(code, 0, output);
      assert.match(output, /^ℹ tests 400$/m, `run ${run + 1}: every test reported`);
      assert.match(output, /^ℹ pass 400$/m);
    }
  });
});
