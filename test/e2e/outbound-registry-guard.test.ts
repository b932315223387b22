// Where the server connects when an image reference, a rule's signature `repository` or a registry's answer
// names a host: a real docker-registry (TLS, htpasswd) and a recording proxy in front of it, both on 127.0.0.1,
// the `resolve` command as a user runs it, and an in-process server's /mutate and /validate.
//
// - A registry on a loopback address (by IP or by a name that resolves to one) is refused before any connection
//   unless the RegistryConfig lists it with allowLocalAddresses: true; the reason names the address.
// - A token realm on a loopback address is refused the same way, unless its host is listed.
// - The server's own credentials (--authfile) are not offered for lookups a NamespacedImagePolicy causes (its
//   signature repository, its pins) unless the registry's entry says serverCredentialsForNamespacedPolicies.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { stringify } from "yaml";
import { loadAuthFile } from "../../src/credentials/docker-config.ts";
import { CredentialKeyring } from "../../src/credentials/keyring.ts";
import { registrySettingsMap, type RegistrySettings } from "../../src/registry/registry-settings.ts";
import { podReview } from "../support/admission.ts";
import { imprimatur } from "../support/cli-process.ts";
import { postJson } from "../support/https-client.ts";
import { startTestApp, type TestApp } from "../support/in-process-app.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { startTamperingProxy, type TamperingProxy } from "../support/tampering-proxy.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

let dir: string;
let registry: TestRegistry;
let tokenRegistry: TestRegistry;
let proxy: TamperingProxy;
let key: SigningKey;
let appDigest: string;
const layouts = new TestLayouts();
const apps: TestApp[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-outbound-guard-"));
  key = generateSigningKey("ecdsa-p256");
  [registry, tokenRegistry] = await Promise.all([startRegistry({ auth: "htpasswd" }), startRegistry({ auth: "token" })]);
  proxy = await startTamperingProxy({ upstream: registry.url, upstreamCa: registry.caPem });
  const layout = layouts.build({ tag: "1.0", seed: "outbound-guard app" });
  await Promise.all([registry.push(layout.layoutDir, "1.0", "team/app", "1.0"), tokenRegistry.push(layout.layoutDir, "1.0", "team/app", "1.0")]);
  appDigest = layout.digest;
  // The image's signature lives in another repository of the same registry: a rule's `repository` points there.
  await pushCosignSignatures({ registry, repository: "team/app", digest: appDigest, signers: [{ key }], signatureRepository: "sigs/app" });
});

after(() =>
  teardown([
    ...apps.map((a) => () => a.close()),
    () => proxy?.stop(),
    () => registry?.stop(),
    () => tokenRegistry?.stop(),
    ...layouts.removals(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

let files = 0;
async function registriesFile(entries: Array<Record<string, unknown>>): Promise<string> {
  const path = join(dir, `registries-${files++}.yaml`);
  await writeFile(path, stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "RegistryConfig", registries: entries }));
  return path;
}

/** What the registry answered after `from` (an earlier accessLog().length). */
const requestsSince = (from: number) => registry.accessLog().slice(from);

describe("resolve: registries on local addresses", () => {
  test("an image on 127.0.0.1 is refused before any connection unless the registries file allows local addresses there", async () => {
    const image = `${registry.host}/team/app:1.0`;
    const caOnly = await registriesFile([{ host: registry.host, ca: registry.caFile }]);
    const seen = registry.accessLog().length;
    const refused = await imprimatur(["resolve", "--registries", caOnly, "--authfile", registry.authFile, image]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, "");
    assert.match(
      refused.stderr,
      new RegExp(
        `^${esc(image)}: .*${esc(registry.host)} is 127\\.0\\.0\\.1, a loopback address: refused; list ${esc(registry.host)} with allowLocalAddresses: true`,
      ),
    );
    assert.deepEqual(requestsSince(seen), [], "no request reached the registry");

    const allowed = await registriesFile(registry.configEntries());
    const resolved = await imprimatur(["resolve", "--registries", allowed, "--authfile", registry.authFile, image]);
    assert.equal(resolved.code, 0, resolved.stderr);
    assert.equal(resolved.stdout, `${image}@${appDigest}\n`);
  });

  test("a name that resolves to a loopback address is refused after resolution; listed with allowLocalAddresses, it works", async () => {
    const host = `localhost:${new URL(registry.url).port}`;
    const image = `${host}/team/app:1.0`;
    const caOnly = await registriesFile([{ host, ca: registry.caFile }]);
    const seen = registry.accessLog().length;
    const refused = await imprimatur(["resolve", "--registries", caOnly, image]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, new RegExp(`${esc(host)} resolves to (127\\.0\\.0\\.1|::1), a loopback address: refused`));
    assert.deepEqual(requestsSince(seen), [], "no request reached the registry");

    const allowed = await registriesFile([{ host, ca: registry.caFile, allowLocalAddresses: true }]);
    const auth = join(dir, "localhost-auth.json");
    await writeFile(auth, JSON.stringify({ auths: { [host]: { auth: Buffer.from(`${registry.username}:${registry.password}`).toString("base64") } } }));
    const resolved = await imprimatur(["resolve", "--registries", allowed, "--authfile", auth, image]);
    assert.equal(resolved.code, 0, resolved.stderr);
    assert.equal(resolved.stdout, `${image}@${appDigest}\n`);
  });

  test("a token realm on a loopback address is refused unless its own host is listed, even when the registry's is", async () => {
    const image = `${tokenRegistry.host}/team/app:1.0`;
    const realmHost = new URL(tokenRegistry.tokenServer!.realm).host;
    const registryOnly = await registriesFile([{ host: tokenRegistry.host, ca: tokenRegistry.caFile, allowLocalAddresses: true }]);
    const before = tokenRegistry.tokenServer!.counters.requests;
    const refused = await imprimatur(["resolve", "--registries", registryOnly, "--authfile", tokenRegistry.authFile, image]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, new RegExp(`the token realm .*${esc(realmHost)} is 127\\.0\\.0\\.1, a loopback address: refused`));
    assert.equal(tokenRegistry.tokenServer!.counters.requests, before, "the token server got no request");

    const both = await registriesFile(tokenRegistry.configEntries());
    const resolved = await imprimatur(["resolve", "--registries", both, "--authfile", tokenRegistry.authFile, image]);
    assert.equal(resolved.code, 0, resolved.stderr);
    assert.equal(resolved.stdout, `${image}@${appDigest}\n`);
  });
});

async function app(policies: string, settings: RegistrySettings[]): Promise<TestApp> {
  const path = join(dir, `policies-${files++}.yaml`);
  await writeFile(path, policies);
  const auth = await loadAuthFile(registry.authFile);
  const started = await startTestApp({
    policies: path,
    registries: registrySettingsMap(settings),
    // The server's own credentials (--authfile): the registry's user, for the registry and for the proxy in front of it.
    staticCredentials: CredentialKeyring.of([...auth.entries, ...auth.entries.map((e) => ({ ...e, key: proxy.host }))]).lookup,
  });
  apps.push(started);
  return started;
}

type Answer = { allowed: boolean; status?: { message: string }; patch?: string };

async function review(a: TestApp, endpoint: "mutate" | "validate", images: string[], namespace: string): Promise<Answer> {
  const r = await postJson(`${a.base}/${endpoint}`, a.ca, podReview({ images, namespace }));
  assert.equal(r.status, 200, r.text);
  return r.body.response as Answer;
}

describe("serve: registries on local addresses", () => {
  const PIN = () =>
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "pin" },
      spec: { rules: [{ action: "allow", images: [`${registry.host}/*`], digestMutate: true }], default: "allow" },
    });

  test("/mutate denies a tag on an unlisted loopback registry with the address as the reason, and pins it once the registry is listed", async () => {
    const image = `${registry.host}/team/app:1.0`;
    const refusing = await app(PIN(), [{ host: registry.host, ca: registry.caPem }]);
    const seen = registry.accessLog().length;
    const denied = await review(refusing, "mutate", [image], "shop");
    assert.equal(denied.allowed, false);
    assert.match(denied.status!.message, new RegExp(`${esc(registry.host)} is 127\\.0\\.0\\.1, a loopback address: refused`));
    assert.deepEqual(requestsSince(seen), [], "no request reached the registry");

    const allowing = await app(PIN(), registry.settings());
    const pinned = await review(allowing, "mutate", [image], "shop");
    assert.equal(pinned.allowed, true, pinned.status?.message);
    assert.match(Buffer.from(pinned.patch!, "base64").toString("utf8"), new RegExp(esc(`${image}@${appDigest}`)));
  });
});

describe("serve: the server's credentials and namespaced policies", () => {
  /** The same verifying rule in a cluster ImagePolicy for prod and in team-a's NamespacedImagePolicy. */
  const SIGNED = () => {
    const rule = {
      action: "allow",
      images: [`${registry.host}/team/*`],
      repository: `${proxy.host}/sigs/app`,
      attestors: [{ entries: [{ staticKey: { name: "release", ignoreTlog: true, key: key.publicKeyPem } }] }],
    };
    return [
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: "prod-signed" },
        spec: { namespaces: ["prod"], rules: [rule], default: "allow" },
      }),
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "NamespacedImagePolicy",
        metadata: { name: "team-signed", namespace: "team-a" },
        spec: { rules: [rule], default: "allow" },
      }),
    ].join("---\n");
  };
  const proxySettings = (extra: Partial<RegistrySettings> = {}): RegistrySettings => ({
    host: proxy.host,
    ca: proxy.caPem,
    allowLocalAddresses: true,
    ...extra,
  });

  test("a NamespacedImagePolicy's signature repository is read without the server's credentials; a cluster ImagePolicy's with them", async () => {
    const a = await app(SIGNED(), [...registry.settings(), proxySettings()]);
    const image = `${registry.host}/team/app@${appDigest}`;

    let from = proxy.requests.length;
    const prod = await review(a, "validate", [image], "prod");
    assert.equal(prod.allowed, true, prod.status?.message);
    assert.ok(
      proxy.requests.slice(from).some((r) => r.authorization),
      "the cluster policy's lookup carried the server's credentials",
    );

    from = proxy.requests.length;
    const team = await review(a, "validate", [image], "team-a");
    assert.equal(team.allowed, false);
    assert.match(team.status!.message, /NamespacedImagePolicy|team-a\/team-signed/);
    assert.match(team.status!.message, /unauthorized/);
    const teamRequests = proxy.requests.slice(from);
    assert.ok(teamRequests.length > 0, "team-a's signature repository was asked");
    assert.deepEqual(
      teamRequests.filter((r) => r.authorization),
      [],
      "no request for team-a's policy carried an Authorization header",
    );
  });

  test("serverCredentialsForNamespacedPolicies: true on the registry's entry lends them to namespaced policies too", async () => {
    const a = await app(SIGNED(), [...registry.settings(), proxySettings({ serverCredentialsForNamespacedPolicies: true })]);
    const team = await review(a, "validate", [`${registry.host}/team/app@${appDigest}`], "team-a");
    assert.equal(team.allowed, true, team.status?.message);
  });

  test("a tag a NamespacedImagePolicy asks to pin is resolved without the server's credentials; a cluster policy's pin uses them", async () => {
    const pin = (namespaced: boolean) =>
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: namespaced ? "NamespacedImagePolicy" : "ImagePolicy",
        metadata: { name: "pin", ...(namespaced ? { namespace: "team-a" } : {}) },
        spec: { rules: [{ action: "allow", images: [`${proxy.host}/team/*`], digestMutate: true }], default: "allow" },
      });
    const image = `${proxy.host}/team/app:1.0`;
    const cluster = await app(pin(false), [...registry.settings(), proxySettings()]);
    const pinned = await review(cluster, "mutate", [image], "team-a");
    assert.equal(pinned.allowed, true, pinned.status?.message);

    const namespaced = await app(pin(true), [...registry.settings(), proxySettings()]);
    const from = proxy.requests.length;
    const denied = await review(namespaced, "mutate", [image], "team-a");
    assert.equal(denied.allowed, false);
    assert.match(denied.status!.message, /unauthorized/);
    assert.deepEqual(
      proxy.requests.slice(from).filter((r) => r.authorization),
      [],
      "no request for team-a's pin carried an Authorization header",
    );
  });
});

function esc(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
