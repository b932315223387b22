// CredentialKeyring: which keys match which images, in which order, as the kubelet's keyring decides it.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { RegistryCredential } from "../../../src/credentials/credential.ts";
import { chainLookups, CredentialKeyring } from "../../../src/credentials/keyring.ts";

/** One credential per key, labelled with the key as written, so results show which keys matched. */
function keyringOf(...keys: string[]): CredentialKeyring {
  return CredentialKeyring.of(keys.map((key) => ({ key, credential: { source: key, username: "user", password: "pass" } })));
}

function matchedKeys(keyring: CredentialKeyring, image: string): string[] {
  const slash = image.indexOf("/");
  return keyring.lookup(image.slice(0, slash), image.slice(slash + 1)).map((c) => c.source);
}

// [key, image (normalized host/repository), matches]
const MATCHING: Array<[string, string, boolean]> = [
  // Plain hosts, and the scheme and API-version prefixes that docker login writes
  ["registry.example.com", "registry.example.com/app", true],
  ["registry.example.com", "registry.example.com/team/app", true],
  ["registry.example.com", "other.example.com/app", false],
  ["https://registry.example.com", "registry.example.com/app", true],
  ["http://registry.example.com/", "registry.example.com/app", true],
  ["registry.example.com/v2/", "registry.example.com/app", true],
  ["https://registry.example.com/v1/", "registry.example.com/app", true],
  ["registry.example.com/v1", "registry.example.com/app", false], // only "/v1/" is an API prefix
  ["Registry.Example.COM", "registry.example.com/app", true],
  ["registry.example.com?x=1", "registry.example.com/app", true],
  // Paths: the key's path is a string prefix of the image's
  ["registry.example.com/team", "registry.example.com/team/app", true],
  ["registry.example.com/team", "registry.example.com/team", true],
  ["registry.example.com/team", "registry.example.com/teamwork/app", true], // a string prefix, as in the kubelet
  ["registry.example.com/team", "registry.example.com/other/app", false],
  ["registry.example.com/team/", "registry.example.com/team/app", true],
  ["registry.example.com/team/", "registry.example.com/team", false],
  ["registry.example.com/v2/team", "registry.example.com/team/app", true],
  ["registry.example.com/v2/team", "registry.example.com/v2/team/app", false],
  ["registry.example.com/team/app", "registry.example.com/team", false],
  // Host parts: the same number of parts, each matched as a glob
  ["example.com", "registry.example.com/app", false],
  ["registry.example.com", "example.com/app", false],
  ["*.example.com", "a.example.com/app", true],
  ["*.example.com", "example.com/app", false],
  ["*.example.com", "a.b.example.com/app", false],
  ["*.*.example.com", "a.b.example.com/app", true],
  ["registry.*", "registry.io/app", true],
  ["registry.*", "registry.example.com/app", false],
  ["k8s.*.io", "k8s.gcr.io/app", true],
  ["app*.example.com", "app1.example.com/app", true],
  ["app*.example.com", "web.example.com/app", false],
  // "?" begins a URL query, so the kubelet's URL parser never sees it as a glob: such a key names no host
  ["?.example.com", "a.example.com/app", false],
  ["r?.example.com", "r1.example.com/app", false],
  ["x[ab].example.com", "xb.example.com/app", true],
  ["x[ab].example.com", "xc.example.com/app", false],
  ["r[0-9].example.com", "r7.example.com/app", true],
  ["r[0-9].example.com", "rx.example.com/app", false],
  ["r[a-c0-3].example.com", "r2.example.com/app", true],
  ["*.example.com/team", "a.example.com/team/app", true],
  ["*.example.com/team", "a.example.com/other/app", false],
  // Malformed globs match nothing
  ["x[.example.com", "x.example.com/app", false],
  ["x[].example.com", "x.example.com/app", false],
  ["x[]a].example.com", "xa.example.com/app", false],
  ["x[a-].example.com", "xa.example.com/app", false],
  // Characters a URL host cannot have make the key unusable, as the kubelet's URL parser rejects it
  ["[^ab].example.com", "c.example.com/app", false],
  ["x[^ab].example.com", "xc.example.com/app", false],
  ["\\x.example.com", "x.example.com/app", false],
  ["[ab].example.com", "a.example.com/app", false], // a leading "[" must be an IPv6 literal
  ["registry.example.com:5x", "registry.example.com:5x/app", false],
  // User info is not part of the host
  ["user@registry.example.com", "registry.example.com/app", true],
  // Ports must be equal; absent is not 443
  ["registry.example.com:5000", "registry.example.com:5000/app", true],
  ["registry.example.com:5000", "registry.example.com/app", false],
  ["registry.example.com", "registry.example.com:5000/app", false],
  ["registry.example.com:5000", "registry.example.com:5001/app", false],
  ["registry.example.com:443", "registry.example.com/app", false],
  ["https://registry.example.com:5000/v2/", "registry.example.com:5000/app", true],
  ["*.example.com:5000", "a.example.com:5000/app", true],
  ["*.example.com:5000", "a.example.com/app", false],
  ["localhost:5000", "localhost:5000/app", true],
  ["localhost", "localhost:5000/app", false],
  ["[::1]:5000", "[::1]:5000/app", true],
  ["[::1]:5000", "[::1]:5001/app", false],
  ["127.0.0.1:5000/team", "127.0.0.1:5000/team/app", true],
  // Docker Hub: images are on host docker.io; "index.docker.io" is the fallback key
  ["docker.io", "docker.io/library/nginx", true],
  ["https://docker.io", "docker.io/library/nginx", true],
  ["docker.io/library", "docker.io/library/nginx", true],
  ["docker.io/library", "docker.io/someone/app", false],
  ["https://index.docker.io/v1/", "docker.io/library/nginx", true],
  ["index.docker.io/v1/", "docker.io/someone/app", true],
  ["index.docker.io", "docker.io/library/nginx", true],
  ["https://index.docker.io/v2/", "docker.io/library/nginx", true],
  ["index.docker.io/library", "docker.io/library/nginx", false], // only the bare host is the fallback
  ["https://index.docker.io/v1/", "quay.io/app", false],
  ["https://index.docker.io/v1/", "docker.io:5000/app", false],
  ["registry-1.docker.io", "docker.io/library/nginx", false],
  ["*.docker.io", "docker.io/library/nginx", false],
  ["*.io", "docker.io/library/nginx", true],
];

describe("CredentialKeyring matching", () => {
  for (const [key, image, matches] of MATCHING) {
    test(`${JSON.stringify(key)} ${matches ? "matches" : "does not match"} ${image}`, () => {
      assert.deepEqual(matchedKeys(keyringOf(key), image), matches ? [key] : []);
    });
  }
});

describe("CredentialKeyring ordering", () => {
  test("every matching key contributes, the more specific path first", () => {
    const keyring = keyringOf("quay.io", "quay.io/team/app", "quay.io/other", "quay.io/team");
    assert.deepEqual(matchedKeys(keyring, "quay.io/team/app"), ["quay.io/team/app", "quay.io/team", "quay.io"]);
    assert.deepEqual(matchedKeys(keyring, "quay.io/team/web"), ["quay.io/team", "quay.io"]);
    assert.deepEqual(matchedKeys(keyring, "quay.io/nobody/app"), ["quay.io"]);
  });

  test("a literal host comes before a wildcard one", () => {
    const keyring = keyringOf("*.example.com", "xa.example.com", "x[a-z].example.com", "x*.example.com");
    assert.deepEqual(matchedKeys(keyring, "xa.example.com/app"), ["xa.example.com", "x[a-z].example.com", "x*.example.com", "*.example.com"]);
  });

  test("the order does not depend on the order the entries came in", () => {
    const keys = ["*.example.com", "registry.example.com/team", "registry.example.com", "*.example.com/team"];
    const expected = ["registry.example.com/team", "registry.example.com", "*.example.com/team", "*.example.com"];
    assert.deepEqual(matchedKeys(keyringOf(...keys), "registry.example.com/team/app"), expected);
    assert.deepEqual(matchedKeys(keyringOf(...[...keys].reverse()), "registry.example.com/team/app"), expected);
  });

  test("keys that normalize alike are one key; its credentials keep the order they were added in", () => {
    const cred = (source: string): { key: string; credential: RegistryCredential } => ({ key: "", credential: { source, username: source } });
    const keyring = CredentialKeyring.of([
      { ...cred("first"), key: "https://registry.example.com/v1/" },
      { ...cred("narrow"), key: "registry.example.com/team" },
      { ...cred("second"), key: "registry.example.com" },
      { ...cred("third"), key: "http://registry.example.com/" },
    ]);
    assert.equal(keyring.size, 4);
    assert.deepEqual(
      keyring.lookup("registry.example.com", "team/app").map((c) => c.source),
      ["narrow", "first", "second", "third"],
    );
  });

  test("the Docker Hub fallback applies only when no other key matched", () => {
    const keyring = keyringOf("docker.io/library", "https://index.docker.io/v1/");
    assert.deepEqual(matchedKeys(keyring, "docker.io/library/nginx"), ["docker.io/library"]);
    assert.deepEqual(matchedKeys(keyring, "docker.io/someone/app"), ["https://index.docker.io/v1/"]);
    const withHost = keyringOf("docker.io", "index.docker.io");
    assert.deepEqual(matchedKeys(withHost, "docker.io/library/nginx"), ["docker.io"]);
  });
});

describe("CredentialKeyring keys that name no registry", () => {
  test("are ignored, reported with their source, and not counted", () => {
    const keyring = keyringOf("", "https://", "/team", "registry.example.com:abc", "registry example.com", "?.example.com", "ok.example.com");
    assert.equal(keyring.size, 1);
    assert.deepEqual(keyring.ignoredKeys, [
      ': ""',
      'https://: "https://"',
      '/team: "/team"',
      'registry.example.com:abc: "registry.example.com:abc"',
      'registry example.com: "registry example.com"',
      '?.example.com: "?.example.com"',
    ]);
    assert.deepEqual(matchedKeys(keyring, "ok.example.com/app"), ["ok.example.com"]);
  });

  test("an empty keyring matches nothing", () => {
    const keyring = CredentialKeyring.of([]);
    assert.equal(keyring.size, 0);
    assert.deepEqual(keyring.lookup("docker.io", "library/nginx"), []);
  });
});

describe("chainLookups", () => {
  const a: RegistryCredential = { source: "secret ns/a", username: "alice", password: "1" };
  const b: RegistryCredential = { source: "secret ns/b", username: "bob", password: "2" };
  const file: RegistryCredential = { source: "authfile /etc/auth.json", registryToken: "t" };

  test("concatenates in the order given and asks each lookup with the same host and repository", () => {
    const asked: string[] = [];
    const lookup = (creds: RegistryCredential[]) => (host: string, repository: string) => {
      asked.push(`${host}/${repository}`);
      return creds;
    };
    const chained = chainLookups(lookup([a]), lookup([]), lookup([b, file]));
    assert.deepEqual(chained("registry.example.com:5000", "team/app"), [a, b, file]);
    assert.deepEqual(asked, Array(3).fill("registry.example.com:5000/team/app"));
  });

  test("the same credential from the same source is returned once, first place kept", () => {
    const aAgain: RegistryCredential = { ...a };
    const chained = chainLookups(
      () => [a, b],
      () => [aAgain, file],
    );
    assert.deepEqual(chained("h", "r"), [a, b, file]);
  });

  test("equal values from different sources, or different values from one source, are all kept", () => {
    const sameValuesElsewhere: RegistryCredential = { ...a, source: "secret ns/c" };
    const otherKeySameSecret: RegistryCredential = { ...a, password: "other" };
    const chained = chainLookups(
      () => [a, sameValuesElsewhere],
      () => [otherKeySameSecret],
    );
    assert.deepEqual(chained("h", "r"), [a, sameValuesElsewhere, otherKeySameSecret]);
  });

  test("no lookups, or lookups with nothing, give []", () => {
    assert.deepEqual(chainLookups()("h", "r"), []);
    assert.deepEqual(
      chainLookups(
        () => [],
        () => [],
      )("h", "r"),
      [],
    );
  });

  test("a keyring's lookup can be passed on unbound", () => {
    const { lookup } = keyringOf("registry.example.com");
    assert.deepEqual(
      chainLookups(lookup)("registry.example.com", "app").map((c) => c.source),
      ["registry.example.com"],
    );
  });
});
