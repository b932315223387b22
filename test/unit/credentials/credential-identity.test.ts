// Who is asking, as a cache key (src/credentials/credential-identity.ts): the credentials a lookup offers for a
// repository, hashed; the same lookup is asked and hashed once per repository.
import assert from "node:assert/strict";
import { test } from "node:test";
import { credentialIdentity } from "../../../src/credentials/credential-identity.ts";
import type { CredentialLookup, RegistryCredential } from "../../../src/credentials/credential.ts";

const repo = (repository: string) => ({ registry: "registry.example.com", repository });
const counting = (credentials: (repository: string) => RegistryCredential[]) => {
  const asked: string[] = [];
  const lookup: CredentialLookup = (_host, repository) => {
    asked.push(repository);
    return credentials(repository);
  };
  return { lookup, asked };
};
const alice = { source: "s", username: "alice", password: "a-secret" } as RegistryCredential;
const bob = { source: "s", username: "bob", password: "b-secret" } as RegistryCredential;

test("the same credentials are the same identity, others another; none is anonymous; no secret appears in it", () => {
  const a = counting(() => [alice]);
  const b = counting(() => [bob]);
  const none = counting(() => []);
  const ofA = credentialIdentity(repo("app"), a.lookup);
  assert.equal(ofA, credentialIdentity(repo("app"), counting(() => [alice]).lookup), "another lookup offering the same credentials");
  assert.notEqual(ofA, credentialIdentity(repo("app"), b.lookup));
  assert.equal(credentialIdentity(repo("app"), none.lookup), "anonymous");
  assert.doesNotMatch(ofA, /alice|secret/);
  assert.match(ofA, /^[A-Za-z0-9_-]{43}$/, "a sha256, base64url");
});

test("a lookup is asked once per repository; a repository it was not asked about is asked; the memory is bounded", () => {
  const per = counting((repository) => (repository === "private" ? [alice] : []));
  assert.equal(credentialIdentity(repo("private"), per.lookup), credentialIdentity(repo("private"), per.lookup));
  assert.equal(credentialIdentity(repo("public"), per.lookup), "anonymous");
  assert.notEqual(credentialIdentity(repo("private"), per.lookup), "anonymous");
  assert.deepEqual(per.asked, ["private", "public"]);
  // Another registry with the same repository is another question.
  credentialIdentity({ registry: "other.example.com", repository: "private" }, per.lookup);
  assert.equal(per.asked.length, 3);
  // Past 1 000 repositories it starts again: the first is asked again, and answered the same.
  for (let i = 0; i < 1_000; i++) credentialIdentity(repo(`r${i}`), per.lookup);
  const before = per.asked.length;
  assert.notEqual(credentialIdentity(repo("private"), per.lookup), "anonymous");
  assert.equal(per.asked.length, before + 1);
});
