// Attestors in ImagePolicy: loading (keys, identities, counts, nested sets, errors with file, line and field)
// and the pure judgement of per-entry outcomes (N of M, nested sets, denials that name the missing signer).
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { judgeAttestors, leafAttestors, type EntryOutcome } from "../../../src/core/image-policy/attestors.ts";
import { parsePublicKey } from "../../../src/core/image-policy/compile-attestors.ts";
import { loadPolicies, parsePolicyText } from "../../../src/policy/load-policies.ts";
import { PolicyLoadError } from "../../../src/policy/policy-error.ts";

const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString();
const ed = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }).toString();
const indent = (pem: string, n: number) =>
  pem
    .trim()
    .split("\n")
    .map((l) => " ".repeat(n) + l)
    .join("\n");

function policy(rules: string): string {
  return `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed}
spec:
  default: deny
  rules:
${rules}`;
}

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe("loading attestors", () => {
  test("keys, keyless identities, counts and nested sets compile; imageReferences is an alias of images", () => {
    const { policies, errors } = parsePolicyText(
      policy(`    - action: allow
      imageReferences: ["registry.example.com/*"]
      attestors:
        - count: 2
          entries:
            - staticKey:
                name: release
                key: |
${indent(ec, 18)}
            - staticKey: {key: "${ed.trim().replace(/\n/g, "\\n")}", ignoreTlog: true}
            - keyless:
                subject: "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/*"
                issuer: https://token.actions.githubusercontent.com
                additionalExtensions: {githubWorkflowTrigger: push, sourceRepositoryURI: "https://github.com/acme/app"}
            - attestors:
                - count: 1
                  entries:
                    - keyless: {subjectRegExp: "^ops@acme\\\\.example$", issuer: https://accounts.example}
`),
      "p.yaml",
    );
    assert.deepEqual(errors, []);
    const rule = policies.ImagePolicy[0]!.rules[0]!;
    assert.equal(rule.images.length, 1);
    const set = rule.attestors![0]!;
    assert.equal(set.required, 2);
    assert.equal(set.entries.length, 4);
    const leaves = leafAttestors(rule.attestors!);
    assert.deepEqual(
      leaves.map((l) => [l.path, l.type, l.label]),
      [
        ["attestors[0].entries[0]", "staticKey", "key release"],
        ["attestors[0].entries[1]", "staticKey", leaves[1]!.label],
        ["attestors[0].entries[2]", "keyless", "keyless https://github.com/acme/app/.github/workflows/release.yml@refs/tags/*"],
        ["attestors[0].entries[3].attestors[0].entries[0]", "keyless", "keyless /^ops@acme\\.example$/"],
      ],
    );
    assert.match(leaves[1]!.label, /^key sha256:[0-9a-f]{12}$/);
    const keyless = leaves[2]!;
    assert.ok(keyless.type === "keyless");
    assert.ok(keyless.subject.test("https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1.2"));
    assert.ok(!keyless.subject.test("https://github.com/evil/app/.github/workflows/release.yml@refs/tags/v1.2"));
    assert.deepEqual(
      keyless.extensions.map((e) => e.oid),
      ["1.3.6.1.4.1.57264.1.2", "1.3.6.1.4.1.57264.1.12"],
    );
    assert.equal(keyless.trustRoot, "sigstore-public-good");
  });

  test("every mistake is a load error naming the field", () => {
    const { errors } = parsePolicyText(
      policy(`    - action: deny
      images: ["evil.example/*"]
      attestors: [{entries: [{keyless: {subject: a, issuer: b}}]}]
    - action: allow
      images: ["registry.example.com/*"]
      attestors:
        - count: 3
          entries:
            - staticKey: {key: "not a key"}
            - staticKey: {}
            - keyless: {subject: a, subjectRegExp: b, issuer: c}
            - keyless: {subjectRegExp: "(", issuer: c}
            - keyless: {subject: a, issuer: c, additionalExtensions: {nonsense: x}}
            - staticKey: {keyRef: "k8s://Bad/"}
    - action: allow
      images: ["x.example/*"]
      attestors: [{count: 2, entries: [{keyless: {subject: a, issuer: b}}]}]
`),
      "p.yaml",
    );
    const got = errors.map((e) => `${e.line} ${e.path}: ${e.message}`);
    const expect = [
      /^9 spec\.rules\[0\]\.attestors: .*a deny rule cannot use them/,
      /^15 spec\.rules\[1\]\.attestors\[0\]\.entries\[0\]\.staticKey\.key: not a PEM public key/,
      /^16 spec\.rules\[1\]\.attestors\[0\]\.entries\[1\]\.staticKey: give exactly one of key/,
      /^17 spec\.rules\[1\]\.attestors\[0\]\.entries\[2\]\.keyless: give exactly one of subject and subjectRegExp/,
      /^18 spec\.rules\[1\]\.attestors\[0\]\.entries\[3\]\.keyless\.subjectRegExp: invalid regular expression/,
      /^19 spec\.rules\[1\]\.attestors\[0\]\.entries\[4\]\.keyless\.additionalExtensions\.nonsense: unknown certificate extension "nonsense"/,
      /^20 spec\.rules\[1\]\.attestors\[0\]\.entries\[5\]\.staticKey\.keyRef: .* is not of the form k8s:\/\/NAMESPACE\/SECRET/,
      /^23 spec\.rules\[2\]\.attestors\[0\]\.count: count 2 is more than the 1 entries/,
    ];
    assert.equal(got.length, expect.length, got.join("\n"));
    for (const [i, re] of expect.entries()) assert.match(got[i]!, re);
  });

  test("keyRef reads a key file next to the policy, and refuses files outside the policy folder", async () => {
    const dir = mkdtempSync(join(tmpdir(), "imprimatur-keyref-"));
    dirs.push(dir);
    mkdirSync(join(dir, "policies", "keys"), { recursive: true });
    writeFileSync(join(dir, "policies", "keys", "release.pub"), ec);
    writeFileSync(join(dir, "outside.pub"), ec);
    const rule = (ref: string) => `    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{staticKey: {keyRef: ${ref}}}]}]
`;
    writeFileSync(join(dir, "policies", "signed.yaml"), policy(rule("keys/release.pub")));
    const loaded = await loadPolicies(join(dir, "policies"));
    const leaf = leafAttestors(loaded.policies.ImagePolicy[0]!.rules[0]!.attestors!)[0]!;
    assert.ok(leaf.type === "staticKey" && "pem" in leaf.key && leaf.key.fingerprint.startsWith("sha256:"));
    assert.equal(leaf.label, "key keys/release.pub");

    writeFileSync(join(dir, "policies", "signed.yaml"), policy(rule("../outside.pub")));
    await assert.rejects(loadPolicies(join(dir, "policies")), (e: unknown) => {
      assert.ok(e instanceof PolicyLoadError);
      assert.match(
        e.message,
        /signed\.yaml:9 \(document 1, spec\.rules\[0\]\.attestors\[0\]\.entries\[0\]\.staticKey\.keyRef\): cannot read "\.\.\/outside\.pub": it is outside the policy folder/s,
      );
      return true;
    });
    writeFileSync(join(dir, "policies", "signed.yaml"), policy(rule("keys/missing.pub")));
    await assert.rejects(loadPolicies(join(dir, "policies")), /keys\/missing\.pub.*ENOENT/s);
  });
});

describe("judging attestor sets", () => {
  const { policies } = parsePolicyText(
    policy(`    - action: allow
      images: ["*"]
      attestors:
        - count: 2
          entries:
            - staticKey: {name: release.pub, key: "${ec.trim().replace(/\n/g, "\\n")}"}
            - staticKey: {name: ops.pub, key: "${ed.trim().replace(/\n/g, "\\n")}"}
            - keyless: {subject: "https://github.com/acme/app/*", issuer: https://token.actions.githubusercontent.com}
        - entries:
            - attestors:
                - count: 1
                  entries:
                    - staticKey: {name: a.pub, key: "${ec.trim().replace(/\n/g, "\\n")}"}
                    - staticKey: {name: b.pub, key: "${ed.trim().replace(/\n/g, "\\n")}"}
`),
    "p.yaml",
  );
  const sets = policies.ImagePolicy[0]!.rules[0]!.attestors!;
  const ok = (entry: string): EntryOutcome => ({ ok: true, signers: [{ entry, attestor: entry, signer: `key ${entry}`, format: "cosign-signature" }] });
  const no = (reason: string): EntryOutcome => ({ ok: false, reason });

  test("2 of 3 and a nested 1 of 2 are satisfied; the evidence lists every satisfied entry", () => {
    const outcomes = new Map<string, EntryOutcome>([
      ["attestors[0].entries[0]", ok("attestors[0].entries[0]")],
      ["attestors[0].entries[1]", no("no signature by this key")],
      ["attestors[0].entries[2]", ok("attestors[0].entries[2]")],
      ["attestors[1].entries[0].attestors[0].entries[1]", ok("b")],
    ]);
    const j = judgeAttestors(sets, outcomes);
    assert.equal(j.satisfied, true);
    assert.deepEqual(
      j.evidence.map((e) => e.entry),
      ["attestors[0].entries[0]", "attestors[0].entries[2]", "b"],
    );
  });

  test("1 of 3 where 2 are needed is denied, naming each entry's outcome", () => {
    const outcomes = new Map<string, EntryOutcome>([
      ["attestors[0].entries[0]", ok("attestors[0].entries[0]")],
      ["attestors[0].entries[1]", no("no signature by this key")],
      ["attestors[0].entries[2]", no('certificate identity "https://github.com/evil/x" does not match "https://github.com/acme/app/*"')],
      ["attestors[1].entries[0].attestors[0].entries[0]", ok("a")],
    ]);
    const j = judgeAttestors(sets, outcomes);
    assert.equal(j.satisfied, false);
    assert.deepEqual(j.evidence, []);
    assert.equal(
      j.explanation,
      "attestors[0] needs 2 of 3: key release.pub verified; key ops.pub: no signature by this key; keyless https://github.com/acme/app/*: " +
        'certificate identity "https://github.com/evil/x" does not match "https://github.com/acme/app/*"',
    );
  });

  test("a nested set counts as one entry and says why it failed", () => {
    const outcomes = new Map<string, EntryOutcome>([
      ["attestors[0].entries[0]", ok("x")],
      ["attestors[0].entries[1]", ok("y")],
    ]);
    const j = judgeAttestors(sets, outcomes);
    assert.equal(j.satisfied, false);
    assert.equal(
      j.explanation,
      "attestors[1] needs its entry: nested set attestors[1].entries[0]: [attestors[1].entries[0].attestors[0] needs 1 of 2: key a.pub: not verified; key b.pub: not verified]",
    );
  });
});

describe("N of M counts distinct signers", () => {
  const ISSUER = "https://token.actions.githubusercontent.com";
  const APP = `subject https://github.com/acme/app/release issuer ${ISSUER}`;
  const OPS = `subject https://github.com/acme/ops/release issuer ${ISSUER}`;
  const { policies, errors } = parsePolicyText(
    policy(`    - action: allow
      images: ["a.example/*"]
      attestors:
        - count: 2
          entries:
            - keyless: {subject: "https://github.com/acme/*", issuer: ${ISSUER}}
            - keyless: {subject: "https://github.com/acme/app/*", issuer: ${ISSUER}}
    - action: allow
      images: ["b.example/*"]
      attestors:
        - count: 2
          entries:
            - keyless: {subject: "https://github.com/acme/*", issuer: ${ISSUER}}
            - attestors:
                - entries:
                    - keyless: {subject: "https://github.com/acme/app/*", issuer: ${ISSUER}}
`),
    "p.yaml",
  );
  assert.deepEqual(errors, []);
  const [flat, nested] = policies.ImagePolicy[0]!.rules.map((r) => r.attestors!);
  const signed = (entry: string, ...signers: string[]): [string, EntryOutcome] => [
    entry,
    { ok: true, signers: signers.map((signer) => ({ entry, attestor: entry, signer, format: "sigstore-bundle" })) },
  ];

  test("one signature that two entries both accept counts once: count 2 is not met by one signer", () => {
    const j = judgeAttestors(flat!, new Map([signed("attestors[0].entries[0]", APP), signed("attestors[0].entries[1]", APP)]));
    assert.equal(j.satisfied, false);
    assert.deepEqual(j.evidence, []);
    assert.equal(
      j.explanation,
      "attestors[0] needs all 2: keyless https://github.com/acme/* verified; keyless https://github.com/acme/app/* verified; " +
        "but one signer counts for one entry only, and these entries have 1 distinct signer",
    );
  });

  test("two signers: each entry gets its own, even when the first entry would take the only signer the second accepts", () => {
    const j = judgeAttestors(flat!, new Map([signed("attestors[0].entries[0]", APP, OPS), signed("attestors[0].entries[1]", APP)]));
    assert.equal(j.satisfied, true, j.explanation);
    assert.deepEqual(
      j.evidence.map((e) => [e.entry, e.signer]),
      [
        ["attestors[0].entries[0]", OPS],
        ["attestors[0].entries[1]", APP],
      ],
    );
  });

  test("a nested set counts as one entry whose signers must differ from those of the other entries it is counted with", () => {
    const leaf = "attestors[0].entries[1].attestors[0].entries[0]";
    const alone = judgeAttestors(nested!, new Map([signed("attestors[0].entries[0]", APP), signed(leaf, APP)]));
    assert.equal(alone.satisfied, false);
    assert.match(alone.explanation, /one signer counts for one entry only/);
    const two = judgeAttestors(nested!, new Map([signed("attestors[0].entries[0]", APP, OPS), signed(leaf, APP)]));
    assert.equal(two.satisfied, true, two.explanation);
    assert.deepEqual(
      two.evidence.map((e) => e.signer),
      [OPS, APP],
    );
  });

  test("separate sets of a rule may be satisfied by the same signer (each set is its own requirement)", () => {
    const { policies: p } = parsePolicyText(
      policy(`    - action: allow
      images: ["*"]
      attestors:
        - entries: [{keyless: {subject: "https://github.com/acme/*", issuer: ${ISSUER}}}]
        - entries: [{keyless: {subject: "https://github.com/acme/app/*", issuer: ${ISSUER}}}]
`),
      "p.yaml",
    );
    const j = judgeAttestors(p.ImagePolicy[0]!.rules[0]!.attestors!, new Map([signed("attestors[0].entries[0]", APP), signed("attestors[1].entries[0]", APP)]));
    assert.equal(j.satisfied, true, j.explanation);
  });

  test("the search for distinct signers is bounded: a set built to make it explode is denied, saying so", () => {
    const n = 14;
    const { policies: p, errors: errs } = parsePolicyText(
      policy(`    - action: allow
      images: ["*"]
      attestors:
        - entries:
${Array.from({ length: n }, (_, i) => `            - keyless: {subject: "https://github.com/acme/*", issuer: ${ISSUER}, trustRoot: r${i}}`).join("\n")}
`),
      "p.yaml",
    );
    assert.deepEqual(errs, []);
    // Every entry accepts the same n − 1 signers: no assignment exists, and trying them all would take (n − 1)! steps.
    const many = Array.from({ length: n - 1 }, (_, i) => `subject https://github.com/acme/s${i} issuer ${ISSUER}`);
    const outcomes = new Map(Array.from({ length: n }, (_, i) => signed(`attestors[0].entries[${i}]`, ...many)));
    const j = judgeAttestors(p.ImagePolicy[0]!.rules[0]!.attestors!, outcomes);
    assert.equal(j.satisfied, false);
    assert.match(j.explanation, /; but no assignment of distinct signers to entries was found within 10000 steps$/);
  });

  test("a set whose entries can never be met by distinct signers is a load error naming the entries", () => {
    const k = (pem: string) => `"${pem.trim().replace(/\n/g, "\\n")}"`;
    const { errors: errs } = parsePolicyText(
      policy(`    - action: allow
      images: ["a.example/*"]
      attestors:
        - count: 2
          entries:
            - staticKey: {name: release, key: ${k(ec)}}
            - staticKey: {name: release-again, key: ${k(ec)}}
            - keyless: {subject: ops@acme.example, issuer: https://accounts.example}
        - entries:
            - keyless: {subject: ops@acme.example, issuer: https://accounts.example}
            - keyless: {subject: ops@acme.example, issuer: https://accounts.example}
        - count: 2
          entries:
            - staticKey: {keyRef: "k8s://sig/keys"}
            - staticKey: {keyRef: "k8s://sig/keys/cosign.pub"}
    - action: allow
      images: ["b.example/*"]
      attestors:
        - count: 1
          entries:
            - staticKey: {key: ${k(ec)}}
            - staticKey: {key: ${k(ec)}}
        - count: 2
          entries:
            - staticKey: {key: ${k(ec)}}
            - staticKey: {key: ${k(ec)}}
            - keyless: {subject: "*@acme.example", issuer: https://accounts.example}
        - count: 2
          entries:
            - staticKey: {name: one, key: ${k(ec)}}
            - staticKey: {name: two, key: ${k(ed)}}
            - staticKey: {name: three, key: ${k(ec)}}
            - staticKey: {name: four, key: ${k(ed)}}
        - entries:
            - staticKey: {key: ${k(ed)}}
            - attestors: [{entries: [{staticKey: {key: ${k(ed)}}}]}]
            - staticKey: {key: ${k(ed)}}
`),
      "p.yaml",
    );
    const needs = (n: number, most: number) => `; this set needs ${n} distinct signers and its entries allow at most ${most}`;
    const edKey = parsePublicKey(ed);
    assert.ok("key" in edKey);
    assert.deepEqual(
      errs.map((e) => `${e.path}: ${e.message}`),
      [
        `spec.rules[0].attestors[1].entries[1]: names the same signer as entries[0] (subject ops@acme.example issuer https://accounts.example)${needs(2, 1)}`,
        `spec.rules[0].attestors[2].entries[1]: names the same signer as entries[0] (key k8s://sig/keys/cosign.pub)${needs(2, 1)}`,
        `spec.rules[1].attestors[3].entries[2]: names the same signer as entries[0] (key ${edKey.key.fingerprint})${needs(3, 2)}`,
      ],
    );
  });
});
