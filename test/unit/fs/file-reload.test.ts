// WatchedFiles, the poller behind serve's certificate, client CA and token files: one poll at a time, driven by
// the test. New contents are taken once two polls in a row read them alike; contents that do not parse, or files
// that cannot be read, are logged once and the value in use stays.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { WatchedFiles } from "../../../src/fs/file-reload.ts";

function capturingLogger() {
  const entries: Array<{ level: number; msg: string; error?: string }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      entries.push(JSON.parse(chunk.toString("utf8")) as { level: number; msg: string; error?: string });
      done();
    },
  });
  return { logger: pino({ level: "info" }, stream), entries };
}

/** A number per line; a line that is not one is refused, naming the file and line. */
function parseNumbers(file: string) {
  return ([text]: readonly string[]): number[] =>
    text!
      .trim()
      .split("\n")
      .map((line, i) => {
        if (!/^\d+$/.test(line)) throw new Error(`${file}:${i + 1}: not a number`);
        return Number(line);
      });
}

async function withFile(run: (file: string) => Promise<void>) {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-watched-"));
  try {
    await run(join(dir, "numbers.txt"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test("a change is taken on the second poll that reads it, and listeners get the new value", async () => {
  await withFile(async (file) => {
    await writeFile(file, "1\n");
    const { logger, entries } = capturingLogger();
    const watched = await WatchedFiles.start({ files: [file], what: "numbers", parse: parseNumbers(file), logger, intervalMs: 3_600_000 });
    try {
      const seen: number[][] = [];
      watched.subscribe((value) => seen.push(value));
      assert.deepEqual(watched.current(), [1]);
      await writeFile(file, "1\n2\n");
      await watched.poll();
      assert.deepEqual(watched.current(), [1], "not yet: a writer may still be at work");
      await watched.poll();
      assert.deepEqual(watched.current(), [1, 2]);
      assert.deepEqual(seen, [[1, 2]]);
      await watched.poll();
      assert.equal(seen.length, 1, "unchanged contents are not handed out again");
      assert.ok(entries.some((e) => e.msg === "numbers: reloaded from the files"));
    } finally {
      watched.close();
    }
  });
});

test("contents that change between two polls wait until they hold still", async () => {
  await withFile(async (file) => {
    await writeFile(file, "1\n");
    const { logger } = capturingLogger();
    const watched = await WatchedFiles.start({ files: [file], what: "numbers", parse: parseNumbers(file), logger, intervalMs: 3_600_000 });
    try {
      await writeFile(file, "2\n");
      await watched.poll();
      await writeFile(file, "3\n");
      await watched.poll();
      assert.deepEqual(watched.current(), [1]);
      await watched.poll();
      assert.deepEqual(watched.current(), [3]);
    } finally {
      watched.close();
    }
  });
});

test("contents that do not parse are logged once, with the parser's file and line, and the value in use stays", async () => {
  await withFile(async (file) => {
    await writeFile(file, "1\n");
    const { logger, entries } = capturingLogger();
    const watched = await WatchedFiles.start({ files: [file], what: "numbers", parse: parseNumbers(file), logger, intervalMs: 3_600_000 });
    try {
      await writeFile(`${file}.new`, "1\nfive\n");
      await rename(`${file}.new`, file);
      for (let i = 0; i < 4; i++) await watched.poll();
      assert.deepEqual(watched.current(), [1]);
      const errors = entries.filter((e) => e.level === 50);
      assert.equal(errors.length, 1, "one error for one bad version of the file");
      assert.equal(errors[0]!.msg, "numbers: the new files are not usable; keeping the one in use");
      assert.equal(errors[0]!.error, `${file}:2: not a number`);

      await writeFile(file, "1\n5\n");
      await watched.poll();
      await watched.poll();
      assert.deepEqual(watched.current(), [1, 5], "put right, it is taken");
    } finally {
      watched.close();
    }
  });
});

test("a file that cannot be read is logged once and the value in use stays; at start it is an error", async () => {
  await withFile(async (file) => {
    await assert.rejects(WatchedFiles.start({ files: [file], what: "numbers", parse: parseNumbers(file), logger: capturingLogger().logger }), {
      name: "FileReadError",
      code: "unreadable-file",
      message: /cannot read .*numbers\.txt: ENOENT/,
    });
    await writeFile(file, "7\n");
    const { logger, entries } = capturingLogger();
    const watched = await WatchedFiles.start({ files: [file], what: "numbers", parse: parseNumbers(file), logger, intervalMs: 3_600_000 });
    try {
      await rm(file);
      await watched.poll();
      await watched.poll();
      assert.deepEqual(watched.current(), [7]);
      const errors = entries.filter((e) => e.level === 50);
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.msg, "numbers: cannot read the files; keeping the one in use");
    } finally {
      watched.close();
    }
  });
});
