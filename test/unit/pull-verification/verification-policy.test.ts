// The four verification policies and the preloaded-image allowlist (src/core/pull-verification/verification-policy.ts),
// with the kubelet's semantics and its pattern syntax, short names normalised.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { allowlisted, parseAllowlistPattern, requiresVerification, type AllowlistPattern } from "../../../src/core/pull-verification/verification-policy.ts";

function patterns(...texts: string[]): AllowlistPattern[] {
  return texts.map((t) => {
    const p = parseAllowlistPattern(t);
    assert.ok(!("error" in p), "error" in p ? p.error : "");
    return p;
  });
}

describe("allowlist patterns", () => {
  it("match a normalised repository exactly, or everything under a prefix", () => {
    const list = patterns("alpine", "registry.example.com/base/*", "registry.example.com:5000/*");
    assert.equal(allowlisted("docker.io/library/alpine", list), true, "a short name is normalised");
    assert.equal(allowlisted("docker.io/library/alpine-extra", list), false);
    assert.equal(allowlisted("registry.example.com/base/debian", list), true);
    assert.equal(allowlisted("registry.example.com/base/team/tool", list), true);
    assert.equal(allowlisted("registry.example.com/basement/x", list), false, "a prefix ends at a path separator");
    assert.equal(allowlisted("registry.example.com/other", list), false);
    assert.equal(allowlisted("registry.example.com:5000/any/thing", list), true, "a registry host with /*");
  });

  it("refuse tags, digests, inner wildcards and invalid names, saying why", () => {
    assert.match(String((parseAllowlistPattern("alpine:3.20") as { error: string }).error), /without tag or digest/);
    assert.match(String((parseAllowlistPattern("registry.example.com/*/x") as { error: string }).error), /may only end the pattern/);
    assert.ok("error" in parseAllowlistPattern("Not Valid"));
  });
});

describe("requiresVerification", () => {
  const list = patterns("registry.example.com/base/*");
  const cases: Array<[Parameters<typeof requiresVerification>[0], boolean, string, boolean]> = [
    ["NeverVerify", false, "registry.example.com/app", false],
    ["NeverVerify", true, "registry.example.com/app", false],
    ["NeverVerifyPreloadedImages", true, "registry.example.com/app", false],
    ["NeverVerifyPreloadedImages", false, "registry.example.com/app", true],
    ["NeverVerifyAllowlistedImages", true, "registry.example.com/base/debian", false],
    ["NeverVerifyAllowlistedImages", true, "registry.example.com/app", true],
    ["NeverVerifyAllowlistedImages", false, "registry.example.com/base/debian", true],
    ["AlwaysVerify", true, "registry.example.com/base/debian", true],
    ["AlwaysVerify", false, "registry.example.com/app", true],
  ];
  for (const [policy, preloaded, repository, expected] of cases) {
    it(`${policy}, ${preloaded ? "preloaded" : "pulled through the proxy"}, ${repository}: ${expected ? "verify" : "no verification"}`, () => {
      assert.equal(requiresVerification(policy, preloaded, repository, list), expected);
    });
  }
});
