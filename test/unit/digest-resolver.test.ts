// The resolver's cache, sharing and deadline logic, with a scripted DigestSource standing in for the registry:
// what is tested here is only the bookkeeping around the client (the client itself is tested against real
// registries in test/e2e/registry-client.test.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import type { CredentialLookup, RegistryCredential } from "../../src/credentials/credential.ts";
import { parseImageReference, type ImageReference } from "../../src/core/image-reference.ts";
import { DigestResolver, type DigestSource } from "../../src/registry/digest-resolver.ts";

const D1 = `sha256:${"a".repeat(64)}`;

function ref(image: string): ImageReference {
  const p = parseImageReference(image);
  assert.ok(p.ok);
  return p.ref;
}

class ScriptedSource implements DigestSource {
  calls: Array<{ image: string; credentials: RegistryCredential[] }> = [];
  release: () => void = () => {};
  private gate: Promise<void> | undefined;
  digest = D1;
  fail: string | undefined;

  hold(): void {
    this.gate = new Promise((r) => (this.release = r));
  }

  async resolveDigest(r: ImageReference, opts: { lookup: CredentialLookup; signal: AbortSignal }) {
    this.calls.push({ image: `${r.registry}/${r.repository}:${r.tag}`, credentials: opts.lookup(r.registry, r.repository) });
    if (this.gate) {
      const aborted = new Promise<never>((_, reject) => opts.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
      await Promise.race([this.gate, aborted]);
    }
    if (this.fail) throw new Error(this.fail);
    return { digest: this.digest, credentialSource: opts.lookup(r.registry, r.repository)[0]?.source ?? "anonymous" };
  }
}

const anonymous: CredentialLookup = () => [];
const withSecret =
  (password: string): CredentialLookup =>
  () => [{ source: "secret ns/regcred", username: "u", password }];

test("100 concurrent resolutions of one new tag cost one lookup; later ones hit the cache until the TTL", async () => {
  let now = 1;
  const source = new ScriptedSource();
  const resolver = new DigestResolver(source, { ttlMs: 30_000 }, () => now);
  source.hold();
  const pending = Array.from({ length: 100 }, () => resolver.resolve(ref("registry.example.com/app:1"), anonymous, Date.now() + 5_000));
  source.release();
  const results = await Promise.all(pending);
  assert.equal(source.calls.length, 1);
  assert.ok(results.every((r) => r.ok && r.digest === D1));
  assert.deepEqual(await resolver.resolve(ref("registry.example.com/app:1"), anonymous, Date.now() + 5_000), {
    ok: true,
    digest: D1,
    credentialSource: "anonymous",
  });
  assert.equal(source.calls.length, 1, "cached");
  now += 30_001;
  await resolver.resolve(ref("registry.example.com/app:1"), anonymous, Date.now() + 5_000);
  assert.equal(source.calls.length, 2, "expired: looked up again");
  assert.equal(resolver.lookups, 2);
});

test("a result obtained with one pod's credentials is not reused for other credentials or anonymous", async () => {
  const source = new ScriptedSource();
  const resolver = new DigestResolver(source);
  await resolver.resolve(ref("registry.example.com/private:1"), withSecret("s3cret"), Date.now() + 5_000);
  await resolver.resolve(ref("registry.example.com/private:1"), anonymous, Date.now() + 5_000);
  await resolver.resolve(ref("registry.example.com/private:1"), withSecret("other"), Date.now() + 5_000);
  await resolver.resolve(ref("registry.example.com/private:1"), withSecret("s3cret"), Date.now() + 5_000);
  assert.equal(source.calls.length, 3);
});

test("failures are returned, not thrown, and not cached", async () => {
  const source = new ScriptedSource();
  source.fail = "registry.example.com: unreachable (ECONNREFUSED)";
  const resolver = new DigestResolver(source);
  assert.deepEqual(await resolver.resolve(ref("registry.example.com/app:1"), anonymous, Date.now() + 5_000), {
    ok: false,
    error: "registry.example.com: unreachable (ECONNREFUSED)",
  });
  source.fail = undefined;
  assert.equal((await resolver.resolve(ref("registry.example.com/app:1"), anonymous, Date.now() + 5_000)).ok, true);
  assert.equal(source.calls.length, 2);
});

test("a registry slower than the admission deadline gives a failure by the deadline, and the lookup is aborted", async () => {
  const source = new ScriptedSource();
  source.hold();
  const resolver = new DigestResolver(source);
  // The source never answers until released, so returning at all shows the wait is bounded by the deadline.
  const r = await resolver.resolve(ref("registry.example.com/slow:1"), anonymous, Date.now() + 150);
  assert.equal(r.ok, false);
  assert.match((r as { error: string }).error, /deadline|aborted/);
  source.release();
});

test("a zero TTL disables the cache but still shares concurrent lookups", async () => {
  const source = new ScriptedSource();
  const resolver = new DigestResolver(source, { ttlMs: 0 });
  source.hold();
  const both = [resolver.resolve(ref("a.example/x:1"), anonymous, Date.now() + 5_000), resolver.resolve(ref("a.example/x:1"), anonymous, Date.now() + 5_000)];
  source.release();
  await Promise.all(both);
  await resolver.resolve(ref("a.example/x:1"), anonymous, Date.now() + 5_000);
  assert.equal(source.calls.length, 2);
});
