// The server config's verification limits: what one image's signature verification may download.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseServerConfig, DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";

const head = { apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig" };

test("verification limits: 16 MiB and 32 artifacts by default, configurable", () => {
  assert.deepEqual(DEFAULT_SERVER_CONFIG.verification, { maxBytesPerImage: 16 * 1024 * 1024, maxArtifactsPerImage: 32 });
  assert.deepEqual(parseServerConfig(head, "c.yaml", "/").verification, DEFAULT_SERVER_CONFIG.verification);
  const c = parseServerConfig({ ...head, verification: { maxBytesPerImage: 4_194_304, maxArtifactsPerImage: 8 } }, "c.yaml", "/");
  assert.deepEqual(c.verification, { maxBytesPerImage: 4_194_304, maxArtifactsPerImage: 8 });
  assert.deepEqual(parseServerConfig({ ...head, verification: { maxArtifactsPerImage: 8 } }, "c.yaml", "/").verification.maxBytesPerImage, 16 * 1024 * 1024);
});

test("verification limits are validated with the field path in the message", () => {
  const bad: Array<[unknown, RegExp]> = [
    [{ maxBytesPerImage: 1000 }, /^c\.yaml \(verification\.maxBytesPerImage\): must be an integer from 65536 \(64 KiB\) to 1073741824 \(1 GiB\)/],
    [{ maxBytesPerImage: 2 * 1024 ** 3 }, /^c\.yaml \(verification\.maxBytesPerImage\): must be an integer from 65536/],
    [{ maxBytesPerImage: "16Mi" }, /^c\.yaml \(verification\.maxBytesPerImage\): must be an integer/],
    [{ maxArtifactsPerImage: 0 }, /^c\.yaml \(verification\.maxArtifactsPerImage\): must be an integer from 1 to 1000/],
    [{ maxArtifactsPerImage: 1001 }, /^c\.yaml \(verification\.maxArtifactsPerImage\): must be an integer from 1 to 1000/],
    [{ maxReferrers: 5 }, /^c\.yaml \(verification\.maxReferrers\): unknown field/],
    ["16Mi", /^c\.yaml \(verification\): must be a mapping/],
  ];
  for (const [verification, message] of bad)
    assert.throws(() => parseServerConfig({ ...head, verification }, "c.yaml", "/"), { name: "ConfigError", code: "invalid-config", message });
});
