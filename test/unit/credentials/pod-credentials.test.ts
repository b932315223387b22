// Whose credentials a lookup gets: a cluster policy's lookups the pod's secrets, then the server's own; a
// namespaced policy's the pod's secrets, and the server's own only for hosts whose registries-file entry lends them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import type { CredentialLookup, RegistryCredential } from "../../../src/credentials/credential.ts";
import { lookupForPolicy, PodCredentials } from "../../../src/kube/pod-credentials.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";

const server = (host: string): RegistryCredential => ({ source: "authfile", username: `server@${host}`, password: "p" });
const pod: RegistryCredential = { source: "secret team-a/regcred", username: "team-a", password: "q" };
const serverCredentials: CredentialLookup = (host) => [server(host)];
const registries = registrySettingsMap([
  { host: "lent.example.com", serverCredentialsForNamespacedPolicies: true },
  { host: "kept.example.com", allowLocalAddresses: true },
  { host: "docker.io", serverCredentialsForNamespacedPolicies: true },
]);
const logger = pino({ level: "silent" });
const sources = (lookup: CredentialLookup, host: string) => lookup(host, "team/app").map((c) => c.username);

test("without a pod: a cluster policy gets the server's credentials everywhere, a namespaced one only where they are lent", async () => {
  const creds = await new PodCredentials({ staticCredentials: serverCredentials, registries, logger }).lookupFor(undefined, Date.now() + 1000);
  assert.ok(!("error" in creds));
  const cluster = lookupForPolicy(creds, {});
  const namespaced = lookupForPolicy(creds, { namespace: "team-a" });
  for (const host of ["lent.example.com", "kept.example.com", "other.example.com"]) assert.deepEqual(sources(cluster, host), [`server@${host}`]);
  assert.deepEqual(sources(namespaced, "lent.example.com"), ["server@lent.example.com"]);
  assert.deepEqual(sources(namespaced, "docker.io"), ["server@docker.io"]);
  assert.deepEqual(sources(namespaced, "kept.example.com"), []);
  assert.deepEqual(sources(namespaced, "other.example.com"), []);
});

test("with a pod: both get the pod's secrets first; without registry settings nothing is lent", async () => {
  const pullSecrets = { credentialsFor: async () => ({ lookup: () => [pod], sources: [], problems: [] }), credentialsKnown: () => undefined };
  const refs = { namespace: "team-a", imagePullSecrets: [], serviceAccountName: "default" };
  const withSettings = await new PodCredentials({ pullSecrets, staticCredentials: serverCredentials, registries, logger }).lookupFor(refs, Date.now() + 1000);
  assert.ok(!("error" in withSettings));
  assert.deepEqual(sources(lookupForPolicy(withSettings, {}), "kept.example.com"), ["team-a", "server@kept.example.com"]);
  assert.deepEqual(sources(lookupForPolicy(withSettings, { namespace: "team-a" }), "kept.example.com"), ["team-a"]);
  assert.deepEqual(sources(lookupForPolicy(withSettings, { namespace: "team-a" }), "lent.example.com"), ["team-a", "server@lent.example.com"]);

  const without = await new PodCredentials({ pullSecrets, staticCredentials: serverCredentials, logger }).lookupFor(refs, Date.now() + 1000);
  assert.ok(!("error" in without));
  assert.deepEqual(sources(lookupForPolicy(without, { namespace: "team-a" }), "lent.example.com"), ["team-a"]);
});
