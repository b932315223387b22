// `imprimatur completion bash|zsh`: scripts the shells accept, made from every command and its documented
// flags; the bash one is also run, as bash runs it when TAB is pressed.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { choicesInDescription, flagCompletion, flagsFromUsage, valueCompletion } from "../../../src/cli/completion.ts";
import { COMMANDS, helpText } from "../../../src/cli/main.ts";
import { imprimatur, installed, REPO_ROOT } from "../../support/cli-process.ts";

const scratch = mkdtempSync(join(tmpdir(), "imprimatur-completion-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Every command with the flag names its help documents. */
async function documented(): Promise<Array<{ name: string; flags: string[] }>> {
  return Promise.all(COMMANDS.map(async (c) => ({ name: c.name, flags: flagsFromUsage(await helpText(c)).flatMap((f) => f.names) })));
}

describe("completion bash", () => {
  let script = "";
  let file = "";
  before(async () => {
    const r = await imprimatur(["completion", "bash"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, "");
    script = r.stdout;
    file = join(scratch, "imprimatur.bash");
    writeFileSync(file, script);
  });

  test("bash -n accepts it", () => {
    const r = spawnSync("bash", ["-n", file], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
  });

  test("it names every command and every documented flag", async () => {
    for (const c of await documented()) {
      assert.match(script, new RegExp(`^    ${c.name}\\)$`, "m"), `a case for ${c.name}`);
      for (const f of c.flags) assert.ok(script.includes(` ${f}`) || script.includes(`"${f}`), `${c.name} ${f}`);
    }
  });

  /** What the script offers when TAB is pressed after WORDS (the last one being completed). */
  function complete(...words: string[]): string[] {
    const program = `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _imprimatur; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const r = spawnSync("bash", ["-c", program, "complete", file, "imprimatur", ...words], { cwd: REPO_ROOT, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split("\n").filter(Boolean).sort();
  }

  test("completes commands, flags, flag values, files and operands", () => {
    assert.deepEqual(complete(""), COMMANDS.map((c) => c.name).sort());
    assert.deepEqual(complete("pro"), ["profiles"]);
    assert.deepEqual(complete("check", "--out"), ["--output"]);
    assert.deepEqual(complete("version", "--output", ""), ["json", "text"]);
    assert.deepEqual(complete("version", "--output", "=", "j"), ["json"]);
    assert.deepEqual(complete("profiles", "-o", ""), ["text", "yaml"]);
    assert.deepEqual(complete("--version", "-o", "t"), ["text"]);
    assert.deepEqual(complete("resolve", "--authfile", "package.js"), ["package.json"]);
    assert.deepEqual(complete("serve", "--policies", "polici"), ["policies"]);
    assert.deepEqual(complete("help", "ch"), ["check"]);
    assert.deepEqual(complete("completion", ""), ["bash", "zsh"]);
    assert.deepEqual(complete("profiles", ""), ["baseline", "restricted"]);
    assert.deepEqual(complete("resolve", "--timeout", ""), []);
    assert.deepEqual(complete("profiles", "--", "-"), []);
    assert.ok(complete("serve", "--").includes("--digest-mode"));
  });

  test("completes the values of flags whose help lists them in words, and --profile with the shipped profiles", () => {
    assert.deepEqual(complete("check", "-o", ""), ["json", "junit", "text", "yaml"]);
    assert.deepEqual(complete("check", "--output", "=", "j"), ["json", "junit"]);
    assert.deepEqual(complete("verify", "-o", ""), ["json", "text", "yaml"]);
    assert.deepEqual(complete("node-records", "--output", ""), ["json", "text", "yaml"]);
    assert.deepEqual(complete("check", "--profile", ""), ["baseline", "restricted"]);
    assert.deepEqual(complete("serve", "--profile", "r"), ["restricted"]);
    assert.deepEqual(complete("serve", "--digest-mode", ""), ["mutate", "record"]);
    assert.deepEqual(complete("node-proxy", "--verification-policy", "NeverVerify"), [
      "NeverVerify",
      "NeverVerifyAllowlistedImages",
      "NeverVerifyPreloadedImages",
    ]);
    assert.deepEqual(complete("serve", "--tls-san", ""), [], "a value of the user's choosing: nothing offered");
  });
});

describe("completion zsh", () => {
  let script = "";
  before(async () => {
    const r = await imprimatur(["completion", "zsh"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, "");
    script = r.stdout;
  });

  test("zsh -n accepts it (where zsh is installed) and its structure is sound", () => {
    assert.match(script, /^#compdef imprimatur\n/);
    assert.match(script, /^_imprimatur\(\) \{$/m);
    assert.match(script, /^ {2}compdef _imprimatur imprimatur$/m);
    assert.equal(script.match(/^\s*case\b/gm)?.length, script.match(/^\s*esac$/gm)?.length, "every case has its esac");
    for (const line of script.split("\n")) {
      if (line.startsWith("#")) continue;
      const unquoted = line.replace(/'\\''/g, "").replace(/'[^']*'/g, "");
      assert.ok(!unquoted.includes("'"), `balanced single quotes: ${line}`);
      assert.ok(!line.endsWith("\\") || line.endsWith(" \\"), `a line continues only after a space: ${line}`);
    }
    if (installed("zsh")) {
      const file = join(scratch, "_imprimatur");
      writeFileSync(file, script);
      const r = spawnSync("zsh", ["-n", file], { encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    }
  });

  test("it offers the listed values of flags: formats, modes, the shipped profiles", () => {
    const section = (name: string) => script.slice(script.search(new RegExp(`^ +\\(${name}\\)$`, "m"))).split(";;")[0]!;
    assert.ok(section("check").includes(":FORMAT:(text json yaml junit)'"), section("check"));
    assert.ok(section("check").includes(":NAME:(baseline restricted)'"));
    assert.ok(section("serve").includes(":MODE:(mutate record)'"));
  });

  test("it names every command, with its summary, and every documented flag", async () => {
    for (const c of await documented()) {
      const command = COMMANDS.find((x) => x.name === c.name)!;
      assert.ok(script.includes(`'${c.name}:${command.summary.replace(/'/g, `'\\''`)}'`), `${c.name} with its summary`);
      assert.match(script, new RegExp(`^ +\\(${c.name}\\)$`, "m"), `a case for ${c.name}`);
      const section = script.slice(script.search(new RegExp(`^ +\\(${c.name}\\)$`, "m"))).split(";;")[0]!;
      for (const f of c.flags) assert.ok(new RegExp(`[{,' ]${f}[=+,}'\\[]`).test(section), `${c.name} ${f}`);
    }
  });
});

describe("completion usage errors", { concurrency: 2 }, () => {
  test("an unsupported shell exits 2 and says which are supported", async () => {
    const r = await imprimatur(["completion", "fish"]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^imprimatur completion: unsupported shell "fish"; supported: bash, zsh\n/);
  });

  test("no shell exits 2", async () => {
    const r = await imprimatur(["completion"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /give one shell: bash or zsh/);
  });
});

test("choicesInDescription: a leading 'a, b or c' or 'a: …; b: …', remarks in parentheses left out; prose gives none", () => {
  assert.deepEqual(choicesInDescription("text (default: one line per finding and a summary), json, yaml or junit"), ["text", "json", "yaml", "junit"]);
  assert.deepEqual(choicesInDescription("text (default), json or yaml"), ["text", "json", "yaml"]);
  assert.deepEqual(choicesInDescription("mutate (default): /mutate pins images to tag@sha256:...; record: resolve and record only (no rewrite)"), [
    "mutate",
    "record",
  ]);
  assert.deepEqual(choicesInDescription("NeverVerify, Preloaded (default (the kubelet's)), or AlwaysVerify, as the kubelet's setting"), [
    "NeverVerify",
    "Preloaded",
    "AlwaysVerify",
  ]);
  assert.deepEqual(choicesInDescription("extra DNS name or IP for the generated certificate (repeatable)"), []);
  assert.deepEqual(choicesInDescription("listen address (default 0.0.0.0)"), []);
  assert.deepEqual(choicesInDescription("see the docs: what it does; and more"), []);
});

test("flagCompletion: --profile gets the shipped profiles, a KIND the policy kinds, else placeholder and description", () => {
  const known = { profiles: ["baseline", "restricted"], kinds: ["ImagePolicy", "PodRestriction", "TrustRoot"] };
  const flag = (names: string[], value: string, description = "") => ({ names, value, description, repeatable: false });
  assert.deepEqual(flagCompletion(flag(["--profile"], "NAME"), known), known.profiles);
  assert.deepEqual(flagCompletion(flag(["--kind"], "KIND", "the policy kind"), known), known.kinds);
  assert.deepEqual(flagCompletion(flag(["-o", "--output"], "FORMAT", "text (default), json or yaml"), known), ["text", "json", "yaml"]);
  assert.deepEqual(flagCompletion(flag(["-o", "--output"], "text|json", "text (default), json or yaml"), known), ["text", "json"]);
  assert.equal(flagCompletion(flag(["--config"], "FILE", "a, b or c"), known), "files");
  assert.deepEqual(flagCompletion(flag(["--name"], "NAME", "the TrustRoot's name"), known), []);
});

test("valueCompletion: choices, files, folders, or nothing", () => {
  assert.deepEqual(valueCompletion("text|json"), ["text", "json"]);
  assert.equal(valueCompletion("FILE"), "files");
  assert.equal(valueCompletion("FILE|DIR"), "files");
  assert.equal(valueCompletion("PATH"), "files");
  assert.equal(valueCompletion("DIR"), "dirs");
  assert.deepEqual(valueCompletion("NAME"), []);
  assert.deepEqual(valueCompletion("OS/ARCH"), []);
});
