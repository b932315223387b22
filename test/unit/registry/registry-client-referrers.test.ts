// OCI 1.1 referrers: the Referrers API (with pages and filters) on the in-process fake registry, because
// docker-registry 2.8, the real registry here, has no such API (its fallback, the referrers tag schema, is tested
// against it in test/e2e/signature-verification.test.ts); the fallback's edge cases here too.
import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { RegistryClient, type RoundTrip } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { nextPage, parseReferrersIndex, referrersTag } from "../../../src/registry/referrers.ts";
import { FakeRegistry, json, testTls, type FakeRegistry as Registry, clientThroughMirror } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const SUBJECT = `sha256:${"a".repeat(64)}`;
const BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json";
const descriptor = (n: number, artifactType = BUNDLE) => ({
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  digest: `sha256:${String(n).repeat(64).slice(0, 64)}`,
  size: 100 + n,
  artifactType,
  annotations: { "dev.sigstore.bundle.content": "dsse-envelope" },
});
const index = (manifests: unknown[]) => ({ schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests });

async function setup(t: TestContext, intercept?: (req: IncomingMessage, res: ServerResponse, registry: Registry) => boolean) {
  const registry = await FakeRegistry.start({ https: true, ...(intercept ? { intercept } : {}) });
  const { caPem } = await testTls();
  const trips: RoundTrip[] = [];
  const client = new RegistryClient({
    settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]),
    onRoundTrip: (trip) => trips.push(trip),
  });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, trips, repo: { registry: registry.host, repository: REPO } };
}

const isReferrers = (req: IncomingMessage) => req.url?.startsWith(`/v2/${REPO}/referrers/${SUBJECT}`) ?? false;

test("the Referrers API answers: descriptors, pages followed, the filter applied here when the registry did not", async (t) => {
  const { client, repo, registry } = await setup(t, (req, res) => {
    if (!isReferrers(req)) return false;
    const page = new URL(req.url!, "http://x").searchParams.get("page");
    if (page === null) {
      res.setHeader("link", `</v2/${REPO}/referrers/${SUBJECT}?page=2>; rel="next"`);
      json(res, 200, index([descriptor(1), descriptor(2, "application/spdx+json")]));
    } else json(res, 200, index([descriptor(3)]));
    return true;
  });
  const all = await client.listReferrers(repo, SUBJECT);
  assert.equal(all.source, "api");
  assert.deepEqual(
    all.descriptors.map((d) => d.size),
    [101, 102, 103],
  );
  const bundles = await client.listReferrers(repo, SUBJECT, { artifactType: BUNDLE });
  assert.deepEqual(
    bundles.descriptors.map((d) => d.size),
    [101, 103],
  );
  assert.ok(registry.server.requests.some((r) => r.url.includes(`artifactType=${encodeURIComponent(BUNDLE)}`)));
});

test("a registry that says it applied the filter is trusted to have done so", async (t) => {
  const { client, repo } = await setup(t, (req, res) => {
    if (!isReferrers(req)) return false;
    res.setHeader("oci-filters-applied", "artifactType");
    json(res, 200, index([descriptor(1, "application/spdx+json")]));
    return true;
  });
  assert.equal((await client.listReferrers(repo, SUBJECT, { artifactType: BUNDLE })).descriptors.length, 1);
});

test("no API (404): the referrers tag index is read, and the repository is not asked for the API again at once", async (t) => {
  const { client, repo, registry, trips } = await setup(t);
  registry.putManifest(
    REPO,
    referrersTag(SUBJECT),
    Buffer.from(JSON.stringify(index([descriptor(1), descriptor(2, "x/y")]))),
    "application/vnd.oci.image.index.v1+json",
  );
  const first = await client.listReferrers(repo, SUBJECT, { artifactType: BUNDLE });
  assert.equal(first.source, "tag-schema");
  assert.deepEqual(
    first.descriptors.map((d) => d.size),
    [101],
  );
  const before = trips.length;
  await client.listReferrers(repo, SUBJECT);
  assert.equal(trips.length - before, 1, "one GET of the tag, no API probe");
  const other = `sha256:${"b".repeat(64)}`;
  assert.deepEqual(await client.listReferrers(repo, other).then((r) => [r.source, r.descriptors.length]), ["none", 0]);
});

test("bad answers are errors with codes: malformed index, refused credentials, server errors", async (t) => {
  let answer: "malformed" | "unauthorized" | "broken" = "malformed";
  const { client, repo } = await setup(t, (req, res) => {
    if (!isReferrers(req)) return false;
    if (answer === "malformed") json(res, 200, index([{ mediaType: "x", digest: "nope", size: 1 }]));
    else if (answer === "unauthorized") json(res, 403, { errors: [{ code: "DENIED" }] });
    else json(res, 500, { errors: [{ code: "UNKNOWN" }] });
    return true;
  });
  assert.equal((await rejection(client.listReferrers(repo, SUBJECT))).code, "protocol");
  answer = "unauthorized";
  assert.equal((await rejection(client.listReferrers(repo, SUBJECT))).code, "unauthorized");
  answer = "broken";
  assert.equal((await rejection(client.listReferrers(repo, SUBJECT))).code, "unavailable");
});

test("a registry that never answers fails at the caller's deadline with code timeout", async (t) => {
  const { client, repo } = await setup(t, (req) => isReferrers(req));
  const started = Date.now();
  const e = await rejection(client.listReferrers(repo, SUBJECT, { signal: AbortSignal.timeout(200) }));
  assert.equal(e.code, "timeout");
  assert.ok(Date.now() - started < 2_000);
});

test("parsing: strict descriptors, same-origin next pages, the tag of the schema", () => {
  assert.deepEqual(parseReferrersIndex(Buffer.from("[")).ok, false);
  assert.match(
    String(
      (parseReferrersIndex(Buffer.from('{"manifests":[{"mediaType":"m","digest":"sha256:' + "a".repeat(64) + '","size":-1}]}')) as { error: string }).error,
    ),
    /size must be a non-negative integer/,
  );
  const answered = new URL(`https://r.example:5000/v2/${REPO}/referrers/x`);
  assert.deepEqual(nextPage(`</v2/${REPO}/referrers/x?n=2>; rel="next"`, REPO, answered), { path: "referrers/x?n=2" });
  assert.deepEqual(nextPage(`<https://r.example:5000/v2/${REPO}/referrers/x?n=3>; rel="next"`, REPO, answered), { path: "referrers/x?n=3" });
  for (const elsewhere of ["https://evil.example", "http://r.example:5000", "https://r.example"])
    assert.ok("refused" in nextPage(`<${elsewhere}/v2/${REPO}/referrers/x>; rel="next"`, REPO, answered)!, elsewhere);
  assert.ok("refused" in nextPage(`</v2/other/referrers/x>; rel="next"`, REPO, answered)!);
  assert.equal(nextPage(undefined, REPO, answered), undefined);
  assert.equal(referrersTag(SUBJECT), `sha256-${"a".repeat(64)}`);
});

const putTagIndex = (registry: Registry, repository: string, manifests: unknown[]) =>
  registry.putManifest(repository, referrersTag(SUBJECT), Buffer.from(JSON.stringify(index(manifests))), "application/vnd.oci.image.index.v1+json");

test("400, 406 and a 200 that is not an OCI image index fall back to the referrers tag schema", async (t) => {
  // One repository per kind of answer: a repository without the API is remembered for a minute.
  const { client, registry } = await setup(t, (req, res) => {
    const m = /^\/v2\/answer\/([a-z0-9]+)\/referrers\//.exec(req.url ?? "");
    if (!m) return false;
    const answer = m[1];
    if (answer === "s400") json(res, 400, { errors: [{ code: "UNSUPPORTED" }] });
    else if (answer === "s406") json(res, 406, { errors: [{ code: "UNSUPPORTED" }] });
    else if (answer === "html") {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html>not here</html>");
    } else {
      res.writeHead(200, { "content-type": "application/vnd.oci.image.manifest.v1+json" });
      res.end(JSON.stringify({ schemaVersion: 2, config: {}, layers: [] }));
    }
    return true;
  });
  for (const answer of ["s400", "s406", "html", "manifest"]) {
    const repository = `answer/${answer}`;
    putTagIndex(registry, repository, [descriptor(1)]);
    const found = await client.listReferrers({ registry: registry.host, repository }, SUBJECT);
    assert.deepEqual([found.source, found.descriptors.map((d) => d.size)], ["tag-schema", [101]], answer);
    assert.ok(registry.requests.some((r) => r.url.startsWith(`/v2/${repository}/referrers/`), answer));
  }
});

test("a 404 for one repository leaves the Referrers API on for the host's other repositories, and is forgotten after a minute", async (t) => {
  let now = 1_000_000;
  const registry = await FakeRegistry.start({
    https: true,
    intercept: (req, res) => {
      if (!req.url?.includes("/referrers/")) return false;
      if (req.url.startsWith(`/v2/${REPO}/`)) json(res, 404, { errors: [{ code: "NAME_UNKNOWN" }] });
      else json(res, 200, index([descriptor(2)]));
      return true;
    },
  });
  const { caPem } = await testTls();
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]), now: () => now });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  const probes = () => registry.requests.filter((r) => r.url.startsWith(`/v2/${REPO}/referrers/`)).length;
  assert.equal((await client.listReferrers({ registry: registry.host, repository: REPO }, SUBJECT)).source, "none");
  const other = await client.listReferrers({ registry: registry.host, repository: "team/other" }, SUBJECT);
  assert.deepEqual([other.source, other.descriptors.map((d) => d.size)], ["api", [102]]);
  await client.listReferrers({ registry: registry.host, repository: REPO }, SUBJECT);
  assert.equal(probes(), 1, "the repository that answered 404 is not probed again at once");
  now += 61_000;
  await client.listReferrers({ registry: registry.host, repository: REPO }, SUBJECT);
  assert.equal(probes(), 2, "after a minute it is asked again");
});

test("an absolute Link to the same host is followed; one to another host is refused", async (t) => {
  let nextHost = "";
  const { client, repo } = await setup(t, (req, res) => {
    if (!isReferrers(req)) return false;
    const page = new URL(req.url!, "http://x").searchParams.get("page");
    if (page === null) {
      res.setHeader("link", `<https://${nextHost}/v2/${REPO}/referrers/${SUBJECT}?page=2>; rel="next"`);
      json(res, 200, index([descriptor(1)]));
    } else json(res, 200, index([descriptor(3)]));
    return true;
  });
  nextHost = repo.registry;
  const all = await client.listReferrers(repo, SUBJECT);
  assert.deepEqual(
    all.descriptors.map((d) => d.size),
    [101, 103],
  );
  nextHost = "elsewhere.example";
  const e = await rejection(client.listReferrers(repo, SUBJECT));
  assert.equal(e.code, "protocol");
  assert.match(e.message, /elsewhere\.example/);
});

test("an empty answer from a mirror is not final: the origin is asked", async (t) => {
  const origin = await FakeRegistry.start({
    https: true,
    intercept: (req, res) => {
      if (!isReferrers(req)) return false;
      json(res, 200, index([descriptor(4)]));
      return true;
    },
  });
  const mirror = await FakeRegistry.start({
    https: true,
    intercept: (req, res) => {
      if (!isReferrers(req)) return false;
      json(res, 200, index([]));
      return true;
    },
  });
  const client = await clientThroughMirror(t, origin, mirror);
  const found = await client.listReferrers({ registry: origin.host, repository: REPO }, SUBJECT);
  assert.deepEqual([found.endpoint, found.descriptors.map((d) => d.size)], [origin.host, [104]]);
  assert.equal(mirror.requests.filter((r) => r.url.includes("/referrers/")).length, 1, "the mirror was asked first");
});
