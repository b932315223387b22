// Proves the registry harness against the real components: docker-registry (distribution 2.8) in each auth
// mode, skopeo pushing OCI layouts built by oci-layout.ts, and the tests' token server. The token server is
// our own (test/support/token-server.ts) because no real token server is packaged; the registry that verifies
// its tokens is real, so every claim about access below is the registry's verdict, not the fake's.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { after, describe, test } from "node:test";
import { MEDIA_TYPES } from "../support/oci-layout.ts";
import { runSkopeo, startRegistry } from "../support/registry.ts";
import type { TestRegistry } from "../support/registry.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const MANIFEST_ACCEPT = [
  MEDIA_TYPES.index,
  MEDIA_TYPES.manifest,
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.docker.distribution.manifest.v2+json",
].join(", ");

const layouts = new TestLayouts();
const layout = layouts.build;
after(() => teardown(layouts.removals()));

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

function httpCall(url: string, opts: { ca: string; method?: string; headers?: Record<string, string>; body?: string }): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const request = url.startsWith("https:") ? httpsRequest : httpRequest;
    const req = request(url, { method: opts.method ?? "GET", ca: opts.ca, headers: opts.headers ?? {}, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`;
}

/** `Bearer realm="…",service="…",scope="…"` → its parameters. */
function parseBearerChallenge(header: string | string[] | undefined): Record<string, string> {
  const text = Array.isArray(header) ? header.join(", ") : (header ?? "");
  assert.match(text, /^Bearer /, `expected a Bearer challenge, got ${JSON.stringify(text)}`);
  const params: Record<string, string> = {};
  for (const match of text.slice("Bearer ".length).matchAll(/(\w+)="([^"]*)"/g)) params[match[1]!] = match[2]!;
  return params;
}

/** The token endpoint, as a registry client calls it after a challenge. */
async function fetchToken(
  registry: TestRegistry,
  scope: string,
  credentials?: { username: string; password: string },
  extra: Record<string, string> = {},
): Promise<{ status: number; token?: string; refreshToken?: string }> {
  const server = registry.tokenServer!;
  const query = new URLSearchParams({ service: server.service, scope, ...extra });
  const answer = await httpCall(`${server.realm}?${query}`, {
    ca: registry.caPem,
    headers: credentials ? { authorization: basic(credentials.username, credentials.password) } : {},
  });
  if (answer.status !== 200) return { status: answer.status };
  const body = JSON.parse(answer.body.toString("utf8")) as { token: string; access_token: string; refresh_token?: string };
  assert.equal(body.token, body.access_token);
  return { status: 200, token: body.token, ...(body.refresh_token ? { refreshToken: body.refresh_token } : {}) };
}

/** GET a manifest the way a registry client does: try, and on a Bearer challenge fetch a token and retry. */
async function getManifest(
  registry: TestRegistry,
  repository: string,
  ref: string,
  credentials?: { username: string; password: string },
): Promise<HttpAnswer & { digest?: string }> {
  const url = `${registry.url}/v2/${repository}/manifests/${ref}`;
  let answer = await httpCall(url, { ca: registry.caPem, headers: { accept: MANIFEST_ACCEPT } });
  if (answer.status === 401 && registry.auth === "token") {
    const challenge = parseBearerChallenge(answer.headers["www-authenticate"]);
    assert.equal(challenge.realm, registry.tokenServer!.realm);
    assert.equal(challenge.scope, `repository:${repository}:pull`);
    const token = await fetchToken(registry, challenge.scope!, credentials);
    assert.equal(token.status, 200, "the token server answers every correctly authenticated request");
    answer = await httpCall(url, { ca: registry.caPem, headers: { accept: MANIFEST_ACCEPT, authorization: `Bearer ${token.token}` } });
  } else if (answer.status === 401 && credentials) {
    answer = await httpCall(url, {
      ca: registry.caPem,
      headers: { accept: MANIFEST_ACCEPT, authorization: basic(credentials.username, credentials.password) },
    });
  }
  const digest = answer.headers["docker-content-digest"];
  return { ...answer, ...(typeof digest === "string" ? { digest } : {}) };
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

describe("OCI layouts", () => {
  test("the same seed gives the same digests; another seed or platform set gives others", () => {
    const a = layout({ tag: "v1", seed: "determinism" });
    const b = layout({ tag: "v1", seed: "determinism" });
    const c = layout({ tag: "v1", seed: "something else" });
    assert.equal(a.digest, b.digest);
    assert.deepEqual(a.manifests, b.manifests);
    assert.notEqual(a.digest, c.digest);
    assert.equal(a.mediaType, MEDIA_TYPES.manifest);

    const multi = layout({
      tag: "v1",
      seed: "determinism",
      platforms: [
        { os: "linux", architecture: "amd64" },
        { os: "linux", architecture: "arm", variant: "v7" },
      ],
    });
    assert.equal(multi.mediaType, MEDIA_TYPES.index);
    assert.equal(multi.manifests.length, 2);
    assert.equal(multi.manifests[0]!.digest, a.digest, "the linux/amd64 instance is the single-platform image");
    assert.notEqual(multi.manifests[1]!.layerDigest, multi.manifests[0]!.layerDigest);
  });
});

for (const auth of ["none", "htpasswd", "token"] as const) {
  describe(`docker-registry with auth ${auth}`, () => {
    test("a pushed image reads back with the locally computed digest, single- and multi-arch", async () => {
      const registry = await startRegistry({ auth });
      try {
        const single = layout({ tag: "v1", seed: `single-${auth}` });
        await registry.push(single.layoutDir, "v1", "library/app", "1.0");
        assert.equal((await registry.inspectRaw("library/app", "1.0")).digest, single.digest, registry.logs());

        const viaHttp = await getManifest(registry, "library/app", "1.0", registry);
        assert.equal(viaHttp.status, 200, registry.logs());
        assert.equal(viaHttp.digest, single.digest);
        assert.equal(viaHttp.headers["content-type"], MEDIA_TYPES.manifest);

        const multi = layout({
          tag: "multi",
          seed: `multi-${auth}`,
          platforms: [
            { os: "linux", architecture: "amd64" },
            { os: "linux", architecture: "arm64", variant: "v8" },
          ],
        });
        await registry.push(multi.layoutDir, "multi", "library/app", "2.0");
        const index = await registry.inspectRaw("library/app", "2.0");
        assert.equal(index.digest, multi.digest, "the index keeps its digest");
        const parsed = JSON.parse(index.raw.toString("utf8")) as { mediaType: string; manifests: Array<{ digest: string }> };
        assert.equal(parsed.mediaType, MEDIA_TYPES.index);
        assert.deepEqual(
          parsed.manifests.map((m) => m.digest),
          multi.manifests.map((m) => m.digest),
        );
        const arm = await registry.inspectRaw("library/app", multi.manifests[1]!.digest);
        assert.equal(arm.digest, multi.manifests[1]!.digest, "each instance is pushed too, addressable by digest");
      } finally {
        await registry.stop();
      }
    });
  });
}

describe("htpasswd auth", () => {
  test("every request needs the right credentials", async () => {
    const registry = await startRegistry({ auth: "htpasswd", users: [{ username: "alice", password: "correct horse" }] });
    try {
      const image = layout({ tag: "v1", seed: "htpasswd-creds" });
      await registry.push(image.layoutDir, "v1", "private/app", "v1");

      const anonymous = await httpCall(`${registry.url}/v2/`, { ca: registry.caPem });
      assert.equal(anonymous.status, 401);
      assert.match(String(anonymous.headers["www-authenticate"]), /^Basic realm=/);
      const wrong = await getManifest(registry, "private/app", "v1", { username: "alice", password: "wrong" });
      assert.equal(wrong.status, 401);
      const unknown = await getManifest(registry, "private/app", "v1", { username: "mallory", password: "correct horse" });
      assert.equal(unknown.status, 401);
      const right = await getManifest(registry, "private/app", "v1", { username: "alice", password: "correct horse" });
      assert.equal(right.status, 200, registry.logs());
      assert.equal(right.digest, image.digest);

      // skopeo with the wrong password fails too (and its error does not echo the password).
      const skopeo = await runSkopeo([
        "inspect",
        "--raw",
        "--creds",
        "alice:wrong",
        "--cert-dir",
        registry.certDir,
        `docker://${registry.host}/private/app:v1`,
      ]);
      assert.notEqual(skopeo.code, 0);
      assert.match(skopeo.stderr, /unauthorized|authentication required/i);
    } finally {
      await registry.stop();
    }
  });
});

describe("token auth", () => {
  test("anonymous pull of public repositories only; users limited to their repositories; tokens are verified", async () => {
    const registry = await startRegistry({
      auth: "token",
      publicRepositories: ["public/**"],
      users: [
        { username: "pusher", password: "push-secret" },
        { username: "team-a", password: "team-a-secret", pull: ["team-a/*"], push: false },
      ],
    });
    const server = registry.tokenServer!;
    try {
      assert.equal(registry.username, "pusher");
      const publicImage = layout({ tag: "v1", seed: "token-public" });
      const teamA = layout({ tag: "v1", seed: "token-team-a" });
      const teamB = layout({ tag: "v1", seed: "token-team-b" });
      await registry.push(publicImage.layoutDir, "v1", "public/base", "v1");
      await registry.push(teamA.layoutDir, "v1", "team-a/app", "v1");
      await registry.push(teamB.layoutDir, "v1", "team-b/app", "v1");

      const challenge = await httpCall(`${registry.url}/v2/`, { ca: registry.caPem });
      assert.equal(challenge.status, 401);
      assert.deepEqual(parseBearerChallenge(challenge.headers["www-authenticate"]), { realm: server.realm, service: server.service });

      // Anonymous: the public repository is readable, a private one is not.
      const anonymousPublic = await getManifest(registry, "public/base", "v1");
      assert.equal(anonymousPublic.status, 200, registry.logs());
      assert.equal(anonymousPublic.digest, publicImage.digest);
      const anonymousPrivate = await getManifest(registry, "team-a/app", "v1");
      assert.equal(anonymousPrivate.status, 401);
      assert.match(String(anonymousPrivate.headers["www-authenticate"]), /error="insufficient_scope"/);

      // A user limited to team-a/*: pulls team-a/app, not team-b/app, and gets no push.
      const teamAUser = { username: "team-a", password: "team-a-secret" };
      const own = await getManifest(registry, "team-a/app", "v1", teamAUser);
      assert.equal(own.status, 200, registry.logs());
      assert.equal(own.digest, teamA.digest);
      assert.equal((await getManifest(registry, "team-b/app", "v1", teamAUser)).status, 401);
      const pushAsTeamA = await runSkopeo([
        "--insecure-policy",
        "copy",
        "--dest-creds",
        "team-a:team-a-secret",
        "--dest-cert-dir",
        registry.certDir,
        `oci:${teamA.layoutDir}:v1`,
        `docker://${registry.host}/team-a/app:v2`,
      ]);
      assert.notEqual(pushAsTeamA.code, 0, "a pull-only user cannot push");
      assert.match(pushAsTeamA.stderr, /denied|unauthorized/i);
      const lastGrant = server.requests.at(-1)!;
      assert.equal(lastGrant.username, "team-a");
      assert.deepEqual(lastGrant.granted, [{ type: "repository", name: "team-a/app", actions: ["pull"] }]);

      // The user with full access pulls everything, and sees that team-a's push left no tag behind.
      const pusher = { username: "pusher", password: "push-secret" };
      assert.equal((await getManifest(registry, "team-b/app", "v1", pusher)).status, 200);
      assert.equal((await getManifest(registry, "team-a/app", "v2", pusher)).status, 404);

      // A wrong password is refused by the token server itself.
      assert.equal((await fetchToken(registry, "repository:team-a/app:pull", { username: "team-a", password: "nope" })).status, 401);
      assert.equal((await fetchToken(registry, "repository:team-a/app:pull", { username: "nobody", password: "team-a-secret" })).status, 401);

      // The registry really verifies tokens: one for another audience, or expired, is refused.
      const manifestUrl = `${registry.url}/v2/team-a/app/manifests/v1`;
      const access = [{ type: "repository", name: "team-a/app", actions: ["pull"] }];
      for (const token of [
        server.signToken("pusher", access, { audience: "another-registry" }),
        server.signToken("pusher", access, { expiresInSeconds: -3600 }),
      ]) {
        const refused = await httpCall(manifestUrl, { ca: registry.caPem, headers: { accept: MANIFEST_ACCEPT, authorization: `Bearer ${token}` } });
        assert.equal(refused.status, 401);
        assert.match(String(refused.headers["www-authenticate"]), /error="invalid_token"/);
      }
      const good = await httpCall(manifestUrl, {
        ca: registry.caPem,
        headers: { accept: MANIFEST_ACCEPT, authorization: `Bearer ${server.signToken("pusher", access)}` },
      });
      assert.equal(good.status, 200, registry.logs());

      assert.ok(server.counters.anonymous >= 2, JSON.stringify(server.counters));
      assert.ok(server.counters.withCredentials >= 4, JSON.stringify(server.counters));
      assert.equal(server.counters.issued, server.requests.filter((r) => r.status === 200).length);
    } finally {
      await registry.stop();
    }
  });

  test("refresh tokens: offline_token on GET, then the OAuth2 refresh_token and password grants", async () => {
    const registry = await startRegistry({ auth: "token", users: [{ username: "robot", password: "robot-secret", pull: ["ci/**"] }] });
    const server = registry.tokenServer!;
    try {
      const image = layout({ tag: "v1", seed: "token-refresh" });
      await registry.push(image.layoutDir, "v1", "ci/tools/app", "v1");
      const manifestUrl = `${registry.url}/v2/ci/tools/app/manifests/v1`;
      const pullWith = (token: string) => httpCall(manifestUrl, { ca: registry.caPem, headers: { accept: MANIFEST_ACCEPT, authorization: `Bearer ${token}` } });

      const first = await fetchToken(
        registry,
        "repository:ci/tools/app:pull",
        { username: "robot", password: "robot-secret" },
        { offline_token: "true", client_id: "harness" },
      );
      assert.equal(first.status, 200);
      assert.ok(first.refreshToken, "offline_token=true returns a refresh token");
      assert.equal(server.counters.refreshTokensIssued, 1);

      const refreshed = await httpCall(server.realm, {
        ca: registry.caPem,
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: first.refreshToken!,
          service: server.service,
          scope: "repository:ci/tools/app:pull",
          client_id: "harness",
        }).toString(),
      });
      assert.equal(refreshed.status, 200);
      const refreshedBody = JSON.parse(refreshed.body.toString("utf8")) as { access_token: string };
      assert.equal((await pullWith(refreshedBody.access_token)).status, 200, registry.logs());

      const byPassword = await httpCall(server.realm, {
        ca: registry.caPem,
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "password",
          username: "robot",
          password: "robot-secret",
          service: server.service,
          scope: "repository:ci/tools/app:pull",
          client_id: "harness",
          access_type: "offline",
        }).toString(),
      });
      assert.equal(byPassword.status, 200);
      const byPasswordBody = JSON.parse(byPassword.body.toString("utf8")) as { access_token: string; refresh_token?: string };
      assert.ok(byPasswordBody.refresh_token);
      assert.equal((await pullWith(byPasswordBody.access_token)).status, 200);

      const unknownRefresh = await httpCall(server.realm, {
        ca: registry.caPem,
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "not-issued", service: server.service, client_id: "harness" }).toString(),
      });
      assert.equal(unknownRefresh.status, 400);
      assert.equal((JSON.parse(unknownRefresh.body.toString("utf8")) as { error: string }).error, "invalid_grant");
    } finally {
      await registry.stop();
    }
  });
});

describe("registry lifecycle", () => {
  test("plain HTTP works; stop() ends the process and removes its dir, and may be called again", async () => {
    const registry = await startRegistry({ auth: "none", tls: false });
    assert.match(registry.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const image = layout({ tag: "v1", seed: "plain-http" });
    await registry.push(image.layoutDir, "v1", "app", "v1");
    assert.equal((await registry.inspectRaw("app", "v1")).digest, image.digest);

    assert.ok(pidAlive(registry.pid));
    assert.ok(existsSync(registry.dir));
    await registry.stop();
    assert.equal(pidAlive(registry.pid), false, "the registry process is gone");
    assert.equal(existsSync(registry.dir), false, "its temp dir is removed");
    await registry.stop();
  });

  test("a token registry's stop() also stops its token server", async () => {
    const registry = await startRegistry({ auth: "token" });
    const realm = registry.tokenServer!.realm;
    assert.equal((await httpCall(`${realm}?service=${registry.tokenServer!.service}`, { ca: registry.caPem })).status, 200);
    await registry.stop();
    assert.equal(pidAlive(registry.pid), false);
    await assert.rejects(httpCall(realm, { ca: registry.caPem }), /ECONNREFUSED|ECONNRESET|socket hang up/);
  });
});
