// The bytes one image's verification may read (verification.maxBytesPerImage), through the real registry client
// against the in-process fake registry: a verification that would pass the limit is denied with code
// download-limit, whatever else failed, so neither fail-closed nor fail-open admits on its account.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { test, type TestContext } from "node:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { RegistryClient } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { ImageVerifier, type VerificationRequest } from "../../../src/verification/image-verifier.ts";
import { FakeRegistry, imageManifest, testTls } from "../registry/fake-registry.ts";
import { attestorsWith } from "../../support/verification-fixtures.ts";

const REPO = "team/app";
const key = generateKeyPairSync("ec", { namedCurve: "P-256" });
const pem = key.publicKey.export({ type: "spki", format: "pem" }).toString();
const attestors = attestorsWith(`{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(pem)}}}`);

/** A fake registry holding an image signed with cosign's `.sig` layout (payload padded to `padding` bytes). */
async function signedImage(t: TestContext, intercept?: (req: IncomingMessage, res: ServerResponse) => boolean) {
  const registry = await FakeRegistry.start({ https: true, ...(intercept ? { intercept: (req, res) => intercept(req, res) } : {}) });
  const digest = registry.putManifest(REPO, "v1", imageManifest("signed"));
  const payload = Buffer.from(
    JSON.stringify({
      critical: {
        identity: { "docker-reference": `${registry.host}/${REPO}` },
        image: { "docker-manifest-digest": digest },
        type: "cosign container image signature",
      },
      optional: { padding: "p".repeat(20_000) },
    }),
  );
  const layerDigest = registry.putBlob(payload);
  const sig = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: `sha256:${createHash("sha256").update("{}").digest("hex")}`, size: 2 },
      layers: [
        {
          mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
          digest: layerDigest,
          size: payload.length,
          annotations: { "dev.cosignproject.cosign/signature": sign("sha256", payload, key.privateKey).toString("base64") },
        },
      ],
    }),
  );
  registry.putManifest(REPO, `${digest.replace(":", "-")}.sig`, sig);
  const { caPem } = await testTls();
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]) });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  const request: VerificationRequest = { image: { registry: registry.host, repository: REPO, digest }, policy: "p", rule: 0, attestors, lookup: () => [] };
  return { client, request };
}

test("under the default limit the image verifies; past a smaller limit it is denied with code download-limit", async (t) => {
  const { client, request } = await signedImage(t);
  const verified = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(request, Date.now() + 5_000);
  assert.equal(verified.status, "verified", verified.status === "verified" ? "" : verified.reason);

  const limited = await new ImageVerifier({ client, trustRoots: () => new Map(), maxBytesPerImage: 10_000 }).verify(request, Date.now() + 5_000);
  assert.equal(limited.status, "denied");
  assert.equal(limited.status === "denied" ? limited.code : undefined, "download-limit");
  assert.match(limited.status === "denied" ? limited.reason : "", /limit of 10000 bytes read per image verification/);
});

test("a limit hit is a denial even when another lookup went unanswered (a fail-open server would otherwise admit)", async (t) => {
  const { client, request } = await signedImage(t, (req, res) => {
    if (!req.url?.includes("/referrers/")) return false;
    res.writeHead(503);
    res.end();
    return true;
  });
  const v = new ImageVerifier({ client, trustRoots: () => new Map(), maxBytesPerImage: 10_000 });
  const result = await v.verify(request, Date.now() + 5_000);
  assert.equal(result.status, "denied");
  assert.equal(result.status === "denied" ? result.code : undefined, "download-limit");
});
