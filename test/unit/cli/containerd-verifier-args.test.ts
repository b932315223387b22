// containerd-verifier's arguments and output (src/cli/containerd-verifier.ts): containerd's, read as Go's flag package
// reads them, and its own; the descriptor on standard input; the one-line reason. The protocol end to end is
// test/e2e/containerd-verifier.test.ts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkDescriptor, parseVerifierArgs, reasonLine } from "../../../src/cli/containerd-verifier.ts";

const D1 = `sha256:${"1".repeat(64)}`;

test("containerd-verifier reads containerd's arguments as Go's flag package does, and its own", () => {
  const args = parseVerifierArgs(["--policies=/p", "-name", "r/a:1", "-digest", D1, "--stdin-media-type=application/vnd.oci.descriptor.v1+json"]);
  assert.deepEqual(args, { policies: "/p", failOpen: false, timeoutMs: 8000, name: "r/a:1", digest: D1, mediaType: "application/vnd.oci.descriptor.v1+json" });
  assert.equal(parseVerifierArgs(["-policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "--timeout", "500ms"]).timeoutMs, 500);
  const problems: Array<[string[], RegExp]> = [
    [["-name", "n", "-digest", D1, "-stdin-media-type", "t"], /--policies is required/],
    [["--policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "-platform", "x"], /Unknown option '--platform'/],
    [["--policies", "/p", "-name"], /Option '--name <value>' argument missing/],
    [["--policies", "/p", "stray"], /Unexpected argument 'stray'/],
    [["--policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "--failure-policy", "Maybe"], /must be Fail or Ignore/],
    [["--policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "--timeout", "0s"], /--timeout must be a duration/],
  ];
  for (const [argv, message] of problems) assert.throws(() => parseVerifierArgs(argv), message);
  assert.equal(checkDescriptor(JSON.stringify({ mediaType: "m", digest: D1, size: 1 }), D1), undefined);
  assert.match(checkDescriptor("[]", D1) ?? "", /not an OCI descriptor/);
  assert.match(checkDescriptor(JSON.stringify({ mediaType: "m", digest: D1 }), D1) ?? "", /no mediaType or size/);
  assert.equal(reasonLine("a\nb"), "a b");
  const long = reasonLine("é".repeat(5000));
  assert.ok(Buffer.byteLength(long) <= 4096 && long.endsWith("..."));
});
