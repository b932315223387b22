// The registry client against real registries: docker-registry (CNCF distribution) with htpasswd and token
// auth over TLS, images pushed by skopeo from OCI layouts whose digests are computed locally. The token server
// is the tests' own (no real one is packaged; see test/support/token-server.ts), but every access decision is
// the real registry's verdict on its tokens. The one fake is the tampering proxy, because no real registry lies
// about its bytes (see test/support/tampering-proxy.ts).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parseImageReference, type ImageReference } from "../../src/core/image-reference.ts";
import type { CredentialLookup, RegistryCredential } from "../../src/credentials/credential.ts";
import { CredentialKeyring } from "../../src/credentials/keyring.ts";
import { RegistryClient, type RegistryClientOptions, type RoundTrip } from "../../src/registry/registry-client.ts";
import { registrySettingsMap, type RegistrySettings } from "../../src/registry/registry-settings.ts";
import type { OciLayout } from "../support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { startTamperingProxy, type TamperingProxy } from "../support/tampering-proxy.ts";
import { rejection } from "../support/registry-rejection.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const ALICE = { username: "alice", password: "alice-Secret-7f3e" };
const PUSHER = { username: "pusher", password: "pusher-Secret-19ad" };
const TEAM_A = { username: "team-a", password: "team-a-Secret-c0de" };

let htpasswd: TestRegistry;
let token: TestRegistry;
/** auth none, TLS: multi-arch, moving tags, and the registry behind the tampering proxy. */
let open: TestRegistry;
let proxy: TamperingProxy;

const layouts = new TestLayouts();
const layout = layouts.build;

const images = {
  privateApp: layout({ tag: "v1", seed: "client-e2e private/app" }),
  publicBase: layout({ tag: "v1", seed: "client-e2e public/base" }),
  teamA: layout({ tag: "v1", seed: "client-e2e team-a/app" }),
  teamB: layout({ tag: "v1", seed: "client-e2e team-b/x" }),
  multi: layout({
    tag: "v1",
    seed: "client-e2e multi",
    platforms: [
      { os: "linux", architecture: "amd64" },
      { os: "linux", architecture: "arm64", variant: "v8" },
    ],
  }),
  movingOld: layout({ tag: "v1", seed: "client-e2e moving old" }),
  movingNew: layout({ tag: "v1", seed: "client-e2e moving new" }),
  tamper: layout({ tag: "v1", seed: "client-e2e tamper" }),
  mirrored: layout({ tag: "v1", seed: "client-e2e mirrored" }),
  upstreamOnly: layout({ tag: "v1", seed: "client-e2e upstream-only" }),
};

before(async () => {
  [htpasswd, token, open] = await Promise.all([
    startRegistry({ auth: "htpasswd", users: [ALICE] }),
    startRegistry({
      auth: "token",
      publicRepositories: ["public/**"],
      users: [PUSHER, { ...TEAM_A, pull: ["team-a/**"], push: false }],
    }),
    startRegistry({ auth: "none" }),
  ]);
  proxy = await startTamperingProxy({ upstream: open.url, upstreamCa: open.caPem });
  const push = (registry: TestRegistry, image: OciLayout, reference: string) => {
    const [repository, tag] = reference.split(":") as [string, string];
    return registry.push(image.layoutDir, image.tag, repository, tag);
  };
  await Promise.all([
    push(htpasswd, images.privateApp, "private/app:v1"),
    push(htpasswd, images.mirrored, "mirrored/app:v1"),
    push(htpasswd, images.upstreamOnly, "upstream-only/app:v1"),
    push(token, images.publicBase, "public/base:v1"),
    push(token, images.teamA, "team-a/app:v1"),
    push(token, images.teamB, "team-b/x:v1"),
    push(open, images.multi, "multi/app:v1"),
    push(open, images.movingOld, "moving/app:stable"),
    push(open, images.tamper, "tamper/app:v1"),
    // The mirror holds the same image as the upstream, as a pull-through cache would.
    push(open, images.mirrored, "mirrored/app:v1"),
  ]);
});

after(() => teardown([() => htpasswd?.stop(), () => token?.stop(), () => open?.stop(), () => proxy?.stop(), ...layouts.removals()]));

function ref(registry: string, image: string): ImageReference {
  const parsed = parseImageReference(`${registry}/${image}`);
  assert.ok(parsed.ok, parsed.ok ? "" : parsed.error);
  return parsed.ref;
}

function keyring(host: string, source: string, user: { username: string; password: string }): CredentialLookup {
  const credential: RegistryCredential = { source, ...user };
  return CredentialKeyring.of([{ key: host, credential }]).lookup;
}

/** A client with `settings`, recording its round trips; closed after the test. */
function client(
  t: { after: (fn: () => Promise<void>) => void },
  settings: RegistrySettings[],
  options: RegistryClientOptions = {},
): { client: RegistryClient; trips: RoundTrip[] } {
  const trips: RoundTrip[] = [];
  const c = new RegistryClient({ settings: registrySettingsMap(settings), onRoundTrip: (trip) => trips.push(trip), ...options });
  t.after(() => c.close());
  return { client: c, trips };
}

/** "GET https://host/v2/… 200", the query string already gone (onRoundTrip never sees one). */
function describeTrips(trips: RoundTrip[]): string[] {
  return trips.map((t) => `${t.method} ${t.url} ${t.status}`);
}

describe("htpasswd registry over TLS", () => {
  const settings = () => htpasswd.settings();
  const aliceLookup = () => keyring(htpasswd.host, "secret ci/alice", ALICE);

  test("resolves a tag to the locally computed digest, names the credential, and fetches verified content", async (t) => {
    const { client: c } = client(t, settings());
    const image = ref(htpasswd.host, "private/app:v1");
    const resolved = await c.resolveDigest(image, { credentials: aliceLookup() });
    assert.equal(resolved.digest, images.privateApp.digest);
    assert.equal(resolved.mediaType, images.privateApp.mediaType);
    assert.equal(resolved.size, images.privateApp.size);
    assert.equal(resolved.credentialSource, "secret ci/alice");
    assert.equal(resolved.endpoint, htpasswd.host);
    assert.equal(resolved.manifests, undefined, "a single-platform image has no index entries");

    const manifest = await c.getManifest({ ...image, digest: resolved.digest }, { credentials: aliceLookup() });
    assert.equal(manifest.digest, images.privateApp.digest);
    const layers = (JSON.parse(manifest.body.toString("utf8")) as { layers: Array<{ digest: string }> }).layers;
    assert.deepEqual(
      layers.map((l) => l.digest),
      [images.privateApp.manifests[0]!.layerDigest],
    );

    const layer = await c.getBlob(image, images.privateApp.manifests[0]!.layerDigest, { credentials: aliceLookup() });
    assert.equal(layer.digest, images.privateApp.manifests[0]!.layerDigest);
    assert.equal(layer.credentialSource, "secret ci/alice");
    assert.ok(layer.body.length > 0);
  });

  test("the constructor's credentials apply when a call brings none", async (t) => {
    const { client: c } = client(t, settings(), { credentials: aliceLookup() });
    const resolved = await c.resolveDigest(ref(htpasswd.host, "private/app:v1"));
    assert.equal(resolved.digest, images.privateApp.digest);
    assert.equal(resolved.credentialSource, "secret ci/alice");
  });

  test("a wrong password is refused: unauthorized, naming the source tried and never the password", async (t) => {
    const { client: c } = client(t, settings());
    const wrong = { username: ALICE.username, password: "Wrong-Password-0451" };
    const error = await rejection(c.resolveDigest(ref(htpasswd.host, "private/app:v1"), { credentials: keyring(htpasswd.host, "secret ci/stale", wrong) }));
    assert.equal(error.code, "unauthorized");
    assert.equal(error.retryable, false);
    assert.match(error.message, /secret ci\/stale/);
    assert.match(error.message, new RegExp(`unauthorized at ${htpasswd.host.replace(/\./g, "\\.")}`));
    assert.deepEqual(error.credentialSources, ["secret ci/stale"]);
    const everything = `${error.message} ${JSON.stringify(error)} ${String(error.stack)}`;
    for (const secret of [wrong.password, Buffer.from(`${wrong.username}:${wrong.password}`).toString("base64")]) {
      assert.ok(!everything.includes(secret), "the error must not carry the password or the Basic auth value");
    }
  });

  test("without credentials: unauthorized, saying none are configured for the host", async (t) => {
    const { client: c } = client(t, settings());
    const error = await rejection(c.resolveDigest(ref(htpasswd.host, "private/app:v1")));
    assert.equal(error.code, "unauthorized");
    assert.match(error.message, /no credentials are configured for/);
    assert.deepEqual(error.credentialSources, ["anonymous"]);
  });

  test("an unknown tag is not-found", async (t) => {
    const { client: c } = client(t, settings());
    const error = await rejection(c.resolveDigest(ref(htpasswd.host, "private/app:no-such-tag"), { credentials: aliceLookup() }));
    assert.equal(error.code, "not-found");
    assert.equal(error.status, 404);
    assert.match(error.message, /no-such-tag/);
  });

  test("a registry whose CA is not trusted fails TLS, clearly, and is never tried over plain HTTP", async (t) => {
    // Listed for its loopback address only, without its CA.
    const { client: c, trips } = client(t, [{ host: htpasswd.host, allowLocalAddresses: true }]);
    const error = await rejection(c.resolveDigest(ref(htpasswd.host, "private/app:v1"), { credentials: aliceLookup() }));
    assert.equal(error.code, "unreachable");
    assert.equal(error.retryable, false, "a certificate that is not trusted stays untrusted on retry");
    assert.match(error.message, /TLS failed/);
    assert.match(error.message, /give it as ca in the registries file/);
    assert.deepEqual(describeTrips(trips), [`GET https://${htpasswd.host}/v2/ 0`], "one attempt, over HTTPS, and no fallback");
  });
});

describe("token-auth registry over TLS", () => {
  const settings = () => token.settings();
  const teamALookup = () => keyring(token.host, "secret team-a/pull", TEAM_A);

  test("anonymous: a public repository resolves, a private one is unauthorized; round trips and token cache", async (t) => {
    const { client: c, trips } = client(t, settings());
    const realm = token.tokenServer!.realm;
    const counters = token.tokenServer!.counters;
    const before = { ...counters };

    // Cold: ping (401 with the Bearer challenge), anonymous token, manifest.
    const cold = await c.resolveDigest(ref(token.host, "public/base:v1"));
    assert.equal(cold.digest, images.publicBase.digest);
    assert.equal(cold.credentialSource, "anonymous");
    assert.deepEqual(describeTrips(trips), [
      `GET https://${token.host}/v2/ 401`,
      `GET ${realm} 200`,
      `GET https://${token.host}/v2/public/base/manifests/v1 200`,
    ]);
    assert.equal(counters.anonymous - before.anonymous, 1);
    assert.equal(counters.issued - before.issued, 1);

    // Warm: the ping and the token are remembered; only the manifest is fetched.
    trips.length = 0;
    const warm = await c.resolveDigest(ref(token.host, "public/base:v1"));
    assert.equal(warm.digest, images.publicBase.digest);
    assert.deepEqual(describeTrips(trips), [`GET https://${token.host}/v2/public/base/manifests/v1 200`]);
    assert.equal(counters.requests - before.requests, 1, "the token server was not asked again");

    // Private: the anonymous token grants nothing for it, and the registry refuses.
    trips.length = 0;
    const error = await rejection(c.resolveDigest(ref(token.host, "team-a/app:v1")));
    assert.equal(error.code, "unauthorized");
    assert.match(error.message, /team-a\/app/);
    assert.deepEqual(describeTrips(trips), [`GET ${realm} 200`, `GET https://${token.host}/v2/team-a/app/manifests/v1 401`]);
  });

  test("with the right user a private repository resolves; the user's token is cached per repository", async (t) => {
    const { client: c, trips } = client(t, settings());
    const realm = token.tokenServer!.realm;
    const counters = token.tokenServer!.counters;
    const before = { ...counters };

    const cold = await c.resolveDigest(ref(token.host, "team-a/app:v1"), { credentials: teamALookup() });
    assert.equal(cold.digest, images.teamA.digest);
    assert.equal(cold.credentialSource, "secret team-a/pull");
    assert.deepEqual(describeTrips(trips), [
      `GET https://${token.host}/v2/ 401`,
      `GET ${realm} 200`,
      `GET https://${token.host}/v2/team-a/app/manifests/v1 200`,
    ]);
    assert.equal(counters.withCredentials - before.withCredentials, 1);
    const grant = token.tokenServer!.requests.at(-1)!;
    assert.equal(grant.username, TEAM_A.username);
    assert.deepEqual(grant.scopes, ["repository:team-a/app:pull"]);

    trips.length = 0;
    const warm = await c.resolveDigest(ref(token.host, "team-a/app:v1"), { credentials: teamALookup() });
    assert.equal(warm.digest, images.teamA.digest);
    assert.equal(warm.credentialSource, "secret team-a/pull");
    assert.deepEqual(describeTrips(trips), [`GET https://${token.host}/v2/team-a/app/manifests/v1 200`]);
    assert.equal(counters.requests - before.requests, 1, "a second resolution of the repository does not hit the token server");

    // The cached token is the user's: an anonymous call for the same repository does not get to use it.
    trips.length = 0;
    const anonymous = await rejection(c.resolveDigest(ref(token.host, "team-a/app:v1")));
    assert.equal(anonymous.code, "unauthorized");
    assert.equal(counters.anonymous - before.anonymous, 1, "anonymous access asked for a token of its own");
  });

  test("a user allowed only team-a/** cannot resolve team-b/x; a user allowed everything can", async (t) => {
    const { client: c } = client(t, settings());
    const error = await rejection(c.resolveDigest(ref(token.host, "team-b/x:v1"), { credentials: teamALookup() }));
    assert.equal(error.code, "unauthorized");
    assert.match(error.message, /secret team-a\/pull/);
    assert.ok(!error.message.includes(TEAM_A.password));
    assert.deepEqual(token.tokenServer!.requests.at(-1)!.granted, [], "the token server granted nothing for team-b/x");

    const resolved = await c.resolveDigest(ref(token.host, "team-b/x:v1"), { credentials: keyring(token.host, "secret ci/pusher", PUSHER) });
    assert.equal(resolved.digest, images.teamB.digest);
    assert.equal(resolved.credentialSource, "secret ci/pusher");
  });
});

describe("images and tags", () => {
  const settings = () => open.settings();

  test("a multi-platform tag resolves to its index digest, listing both platforms, each fetchable by digest", async (t) => {
    const { client: c } = client(t, settings());
    const image = ref(open.host, "multi/app:v1");
    const resolved = await c.resolveDigest(image);
    assert.equal(resolved.digest, images.multi.digest);
    assert.equal(resolved.mediaType, "application/vnd.oci.image.index.v1+json");
    assert.equal(resolved.credentialSource, "anonymous");
    assert.deepEqual(
      resolved.manifests?.map((m) => ({ digest: m.digest, platform: m.platform })),
      [
        { digest: images.multi.manifests[0]!.digest, platform: { os: "linux", architecture: "amd64" } },
        { digest: images.multi.manifests[1]!.digest, platform: { os: "linux", architecture: "arm64", variant: "v8" } },
      ],
    );
    const arm64 = resolved.manifests!.find((m) => m.platform?.architecture === "arm64")!;
    const manifest = await c.getManifest({ ...image, digest: arm64.digest });
    assert.equal(manifest.digest, images.multi.manifests[1]!.digest);
    assert.equal(manifest.mediaType, "application/vnd.oci.image.manifest.v1+json");
    assert.equal(manifest.manifests, undefined);
  });

  test("a moved tag resolves to the new digest, and the old digest still resolves by digest", async (t) => {
    const { client: c } = client(t, settings());
    const image = ref(open.host, "moving/app:stable");
    assert.equal((await c.resolveDigest(image)).digest, images.movingOld.digest);

    await open.push(images.movingNew.layoutDir, images.movingNew.tag, "moving/app", "stable");
    assert.notEqual(images.movingNew.digest, images.movingOld.digest);
    assert.equal((await c.resolveDigest(image)).digest, images.movingNew.digest, "the tag now points to the new image");

    // What keeps a pod pinned at admission on the image that was approved, whatever the tag does later.
    const pinned = await c.getManifest({ ...image, digest: images.movingOld.digest });
    assert.equal(pinned.digest, images.movingOld.digest);
    const viaResolve = await c.resolveDigest({ ...image, digest: images.movingOld.digest });
    assert.equal(viaResolve.digest, images.movingOld.digest, "a reference with tag and digest is fetched by its digest");
  });
});

describe("a proxy that alters manifests", () => {
  // The client trusts the proxy's CA, as it would trust a mirror's: TLS cannot help, only digests can.
  const settings = () => [{ host: proxy.host, ca: proxy.caPem, allowLocalAddresses: true }];

  test("passing through, the proxy serves the registry's image (the tests below change only its mode)", async (t) => {
    proxy.mode = "pass";
    const { client: c } = client(t, settings());
    const resolved = await c.resolveDigest(ref(proxy.host, "tamper/app:v1"));
    assert.equal(resolved.digest, images.tamper.digest);
    assert.equal(resolved.endpoint, proxy.host);
  });

  test("a body that does not hash to its Docker-Content-Digest is rejected as digest-mismatch", async (t) => {
    proxy.mode = "alter-body";
    t.after(() => {
      proxy.mode = "pass";
    });
    const { client: c } = client(t, settings());
    const error = await rejection(c.resolveDigest(ref(proxy.host, "tamper/app:v1")));
    assert.equal(error.code, "digest-mismatch");
    assert.equal(error.retryable, false);
    assert.match(error.message, /body does not match its digest/);
    assert.ok(error.message.includes(images.tamper.digest), "the message names the digest the registry announced");
    assert.ok(
      proxy.requests.some((r) => r.tampered && r.path === "/v2/tamper/app/manifests/v1"),
      "the proxy did alter the manifest",
    );
  });

  test("a self-consistent altered body (its Docker-Content-Digest rewritten) is rejected when fetched by digest", async (t) => {
    proxy.mode = "alter-body-and-digest";
    t.after(() => {
      proxy.mode = "pass";
    });
    const { client: c } = client(t, settings());
    const image = ref(proxy.host, "tamper/app:v1");
    const error = await rejection(c.getManifest({ ...image, digest: images.tamper.digest }));
    assert.equal(error.code, "digest-mismatch");
    assert.match(error.message, /the requested digest is/);
    assert.match(error.message, /body does not match its digest/);
    assert.ok(error.message.includes(images.tamper.digest));
    assert.equal((await rejection(c.resolveDigest({ ...image, digest: images.tamper.digest }))).code, "digest-mismatch");

    // By tag, a response that agrees with itself cannot be told from the truth: it resolves to the altered
    // digest. That is why a pinned digest, not a tag, is what admission approves and the node pulls.
    const byTag = await c.resolveDigest(image);
    assert.notEqual(byTag.digest, images.tamper.digest);
  });
});

describe("mirrors", () => {
  // The htpasswd registry is the upstream; the mirror is the proxy in front of the open registry, which holds
  // mirrored/app (the same image) but not upstream-only/app. Credentials exist only for the upstream.
  const settings = () => [
    { ...htpasswd.settings()[0]!, mirrors: [proxy.host] },
    { host: proxy.host, ca: proxy.caPem, allowLocalAddresses: true },
  ];
  const lookup = () => keyring(htpasswd.host, "secret ci/alice", ALICE);

  test("a mirror that has the repository answers, with its own (here: no) credentials", async (t) => {
    proxy.mode = "pass";
    const { client: c } = client(t, settings());
    const seen = proxy.requests.length;
    const resolved = await c.resolveDigest(ref(htpasswd.host, "mirrored/app:v1"), { credentials: lookup() });
    assert.equal(resolved.digest, images.mirrored.digest);
    assert.equal(resolved.endpoint, proxy.host);
    assert.equal(resolved.credentialSource, "anonymous");
    const atMirror = proxy.requests.slice(seen);
    assert.ok(atMirror.some((r) => r.path === "/v2/mirrored/app/manifests/v1" && r.status === 200));
    assert.ok(
      atMirror.every((r) => !r.authorization),
      "the upstream's credential never goes to the mirror",
    );
  });

  test("when the mirror does not have the repository, the upstream answers with its credential", async (t) => {
    proxy.mode = "pass";
    const { client: c, trips } = client(t, settings());
    const resolved = await c.resolveDigest(ref(htpasswd.host, "upstream-only/app:v1"), { credentials: lookup() });
    assert.equal(resolved.digest, images.upstreamOnly.digest);
    assert.equal(resolved.endpoint, htpasswd.host);
    assert.equal(resolved.credentialSource, "secret ci/alice");
    assert.ok(
      trips.some((r) => r.url === `https://${proxy.host}/v2/upstream-only/app/manifests/v1` && r.status === 404),
      describeTrips(trips).join("\n"),
    );
  });

  test("a mirror serving altered bytes is skipped; the upstream's verified answer wins", async (t) => {
    proxy.mode = "alter-body";
    t.after(() => {
      proxy.mode = "pass";
    });
    const { client: c } = client(t, settings());
    const resolved = await c.resolveDigest(ref(htpasswd.host, "mirrored/app:v1"), { credentials: lookup() });
    assert.equal(resolved.digest, images.mirrored.digest);
    assert.equal(resolved.endpoint, htpasswd.host);
  });

  test("when neither has the image, the error lists every endpoint, mirror first", async (t) => {
    const { client: c } = client(t, settings());
    const error = await rejection(c.resolveDigest(ref(htpasswd.host, "nowhere/app:v1"), { credentials: lookup() }));
    assert.equal(error.code, "not-found");
    assert.deepEqual(
      error.attempts?.map((a) => [a.endpoint, a.code]),
      [
        [proxy.host, "not-found"],
        [htpasswd.host, "not-found"],
      ],
    );
    assert.match(error.message, /every endpoint failed, mirrors first/);
  });
});
