// `--help`, `-h` and `help COMMAND` on every command, the overview, and unknown commands: the real command
// in a child process, its output and exit code.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { COMMANDS, findCommand, helpText, overview } from "../../../src/cli/main.ts";
import { imprimatur } from "../../support/cli-process.ts";

describe("COMMAND --help and -h", { concurrency: 4 }, () => {
  for (const command of COMMANDS) {
    for (const flag of ["--help", "-h"]) {
      test(`${command.name} ${flag} prints its help and exits 0`, async () => {
        const r = await imprimatur([command.name, flag]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, "");
        assert.equal(r.stdout, await helpText(command));
        assert.match(r.stdout, new RegExp(`^Usage: imprimatur ${command.name}\\b`));
        assert.match(r.stdout, /^ +-h, --help +show this help$/m);
      });
    }
  }
});

describe("help among other arguments", { concurrency: 4 }, () => {
  test("check -f x --help shows check's help instead of checking", async () => {
    const r = await imprimatur(["check", "-f", "does-not-exist.yaml", "--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, await helpText(findCommand("check")!));
  });

  test("-h after an operand and before other flags", async () => {
    const r = await imprimatur(["profiles", "restricted", "-h", "--output", "yaml"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, await helpText(findCommand("profiles")!));
  });

  test("after --, -h is an operand like any other", async () => {
    const r = await imprimatur(["profiles", "--", "-h"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown profile "-h"/);
  });

  test("a usage error still exits 2 without --help", async () => {
    const r = await imprimatur(["version", "--output", "xml"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--output must be text or json/);
  });
});

describe("help and the overview", { concurrency: 4 }, () => {
  test("help check prints check's help", async () => {
    const r = await imprimatur(["help", "check"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, await helpText(findCommand("check")!));
  });

  test("--help COMMAND is help COMMAND", async () => {
    const r = await imprimatur(["--help", "resolve"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, await helpText(findCommand("resolve")!));
  });

  for (const args of [[], ["help"], ["--help"], ["-h"]]) {
    test(`"imprimatur ${args.join(" ")}" prints the overview of every command`, async () => {
      const r = await imprimatur(args);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, overview());
      for (const c of COMMANDS) assert.match(r.stdout, new RegExp(`^  imprimatur ${c.name} .*${escape(c.summary)}$`, "m"));
    });
  }

  test("help of an unknown command exits 2", async () => {
    const r = await imprimatur(["help", "frobnicate"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command "frobnicate"/);
  });

  test("an unknown command exits 2 with one line and where the help is, even with --help", async () => {
    for (const args of [["frobnicate"], ["frobnicate", "--help"]]) {
      const r = await imprimatur(args);
      assert.equal(r.code, 2);
      assert.equal(r.stdout, "");
      assert.equal(r.stderr, `imprimatur: unknown command "frobnicate"\nsee 'imprimatur --help'\n`);
    }
  });

  test("a usage error of any command is one line naming the problem, then where its help is", async () => {
    for (const c of COMMANDS) {
      const r = await imprimatur([c.name, "--no-such-flag"]);
      assert.equal(r.code, 2, c.name);
      assert.equal(r.stdout, "", c.name);
      assert.match(r.stderr, new RegExp(`^imprimatur ${c.name}: Unknown option '--no-such-flag'[^\n]*\nsee 'imprimatur ${c.name} --help'\n$`), c.name);
    }
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
