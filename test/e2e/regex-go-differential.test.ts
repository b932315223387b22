// The patterns a policy writes mean what they mean to Kubernetes: a table of patterns and inputs judged by
// linear-regex.ts and by Go's regexp (RE2, what kube-apiserver's CEL `matches()` runs), which must agree on every
// pattern's validity and on every input, searched anywhere and matched whole. Go is Debian's golang-go, which the
// test provisioning installs to build kube-apiserver; the program uses the standard library only (no network).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { compileLinearRegex } from "../../src/core/primitives/linear-regex.ts";
import { findCommand } from "../support/executables.ts";

type Row = { pattern: string; inputs: string[] };
type Verdict = { error: string } | { anywhere: boolean[]; whole: boolean[] };

const ASCII = ["", "a", "ab", "abc", "aab", "web-1", "Web-1", "a\n", "a\nb\nc", "x-y_z", " a ", "aaaa", "AbC"];
const UNICODE = ["é", "e\u0301", "😀", "ü", "٣", "\u00a0", "\u000b", "\u2028", "K", "\u212a", "ß", "STRASSE", "ΑΒΓ", "αβγ", "日本"];
const INPUTS = [...ASCII, ...UNICODE];

// Valid patterns: anchors, dot, classes (Perl, POSIX, Unicode), case folding, repetition, escapes, flags.
const VALID = [
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
  "web-[0-9]+",
  "a|ab",
  "(a|ab)(c|bcd)?",
  "x*",
  "",
  "^a$",
  "a$",
  "(?m)^b$",
  "\\Aa\\z",
  "^.$",
  "(?s)^.$",
  "^..$",
  "\\d",
  "^\\w+$",
  "\\s",
  "\\S",
  "\\bb",
  "\\Bb",
  "^\\pL+$",
  "^\\p{Greek}+$",
  "\\PL",
  "^\\p{Han}+$",
  "^[[:alpha:]]+$",
  "[^[:space:]]",
  "[[:^alpha:]]",
  "(?i)^k$",
  "(?i)straße",
  "(?i)^abc$",
  "(?i)é",
  "a{2,3}",
  "^a{2,3}$",
  "a{,2}",
  "x{",
  "^(?:a?){3}a{3}$",
  "\\Q.*\\E",
  "\\x{1F600}",
  "\\101",
  "\\-\\_",
  "a+?b",
  "(?U)a+",
  "[\\d\\-]",
  "[a-c&&b]",
  "(?P<first>a)b",
  "\\v",
  "[\\x{0}-\\x{10FFFF}]",
];

// Refused by RE2: backreferences, look-around, possessive and nested quantifiers, Perl escapes it lacks, bad syntax.
const INVALID = [
  "(a)\\1",
  "(?=a)",
  "(?!a)",
  "(?<=a)b",
  "(?<!a)b",
  "a++",
  "a**",
  "a{2}{3}",
  "\\Z",
  "\\C",
  "\\8",
  "\\u0041",
  "\\cA",
  "[a-",
  "(",
  ")",
  "*a",
  "a{1001}",
  "(a{100}){100}",
  "\\p{Foo}",
  "[z-a]",
  "(?i",
  "(?#comment)",
];

// Where RE2 itself is stricter than Go: a capture group name given twice (Go keeps both groups; RE2, and so
// linear-regex.ts, refuses the pattern). Listed so the difference is known and stays the only one.
const STRICTER_THAN_GO = ["(?P<n>a)(?P<n>b)"];

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-regex-go-"));
});
after(() => dir && rm(dir, { recursive: true, force: true }));

const GO_PROGRAM = `package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
)

type row struct {
	Pattern string   \`json:"pattern"\`
	Inputs  []string \`json:"inputs"\`
}

type verdict struct {
	Error    *string \`json:"error,omitempty"\`
	Anywhere []bool  \`json:"anywhere,omitempty"\`
	Whole    []bool  \`json:"whole,omitempty"\`
}

func main() {
	var rows []row
	if err := json.NewDecoder(os.Stdin).Decode(&rows); err != nil {
		panic(err)
	}
	out := make([]verdict, len(rows))
	for i, r := range rows {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			reason := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
			out[i].Error = &reason
			continue
		}
		// The pattern compiled alone, so wrapping it keeps its meaning: the whole input must match.
		whole := regexp.MustCompile("^(?:" + r.Pattern + ")$")
		out[i].Anywhere = make([]bool, len(r.Inputs))
		out[i].Whole = make([]bool, len(r.Inputs))
		for j, in := range r.Inputs {
			out[i].Anywhere[j] = re.MatchString(in)
			out[i].Whole[j] = whole.MatchString(in)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		panic(err)
	}
}
`;

function goVerdicts(rows: Row[]): Verdict[] {
  const go = findCommand("go");
  assert.ok(go, "Go is not installed: the test provisioning installs Debian's golang-go (scripts/kube-build.sh)");
  const cache = join(process.env.IMPRIMATUR_CACHE ?? join(homedir(), ".cache", "imprimatur"), "gocache");
  const r = spawnSync(go, ["run", join(dir, "main.go")], {
    input: JSON.stringify(rows),
    encoding: "utf8",
    cwd: dir,
    timeout: 300_000,
    env: { ...process.env, GOCACHE: cache, GO111MODULE: "off", GOFLAGS: "", GOPROXY: "off", GOPATH: join(dir, "gopath") },
  });
  assert.equal(r.status, 0, `go run failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Verdict[];
}

function ourVerdict(row: Row): Verdict {
  const anywhere = compileLinearRegex(row.pattern, "anywhere");
  const whole = compileLinearRegex(row.pattern, "whole");
  if ("error" in anywhere || "error" in whole) return { error: "error" in anywhere ? anywhere.error : (whole as { error: string }).error };
  return { anywhere: row.inputs.map((i) => anywhere.regex.test(i)), whole: row.inputs.map((i) => whole.regex.test(i)) };
}

test("every pattern of the table is valid or refused as Go's regexp has it, and matches every input as Go's does", async () => {
  await writeFile(join(dir, "main.go"), GO_PROGRAM);
  const rows: Row[] = [...VALID, ...INVALID, ...STRICTER_THAN_GO].map((pattern) => ({ pattern, inputs: INPUTS }));
  const go = goVerdicts(rows);
  const disagreements: string[] = [];
  rows.forEach((row, i) => {
    const theirs = go[i]!;
    const ours = ourVerdict(row);
    if ("error" in theirs || "error" in ours) {
      // Refused by both (the words differ between Go versions: Go 1.22 reads "(?<" as a named group).
      const agree = "error" in ours && ("error" in theirs || STRICTER_THAN_GO.includes(row.pattern));
      if (!agree) disagreements.push(`${JSON.stringify(row.pattern)}: Go ${JSON.stringify(theirs)}, ours ${JSON.stringify(ours)}`);
      return;
    }
    if (!("anywhere" in ours)) return;
    row.inputs.forEach((input, j) => {
      for (const scope of ["anywhere", "whole"] as const)
        if (theirs[scope][j] !== ours[scope][j])
          disagreements.push(`${JSON.stringify(row.pattern)} ${scope} on ${JSON.stringify(input)}: Go ${theirs[scope][j]}, ours ${ours[scope][j]}`);
    });
  });
  assert.deepEqual(disagreements, []);
  // The table is what it says: each list holds what its name says, for Go too.
  assert.deepEqual(
    go.map((v) => "error" in v),
    rows.map((row, i) => i >= VALID.length && !STRICTER_THAN_GO.includes(row.pattern)),
  );
});
