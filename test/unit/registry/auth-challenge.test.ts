import { test } from "node:test";
import assert from "node:assert/strict";
import { chooseEndpointAuth, parseAuthChallenges, type AuthChallenge } from "../../../src/registry/auth-challenge.ts";

const parses: Array<[string, string | string[], AuthChallenge[]]> = [
  ["Basic with a realm", 'Basic realm="Registry Realm"', [{ scheme: "basic", params: { realm: "Registry Realm" } }]],
  [
    "Docker token spec example: comma inside the quoted scope",
    'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:samalba/my-app:pull,push"',
    [{ scheme: "bearer", params: { realm: "https://auth.docker.io/token", service: "registry.docker.io", scope: "repository:samalba/my-app:pull,push" } }],
  ],
  ["scheme and names are case-insensitive", 'BEARER Realm="r", SERVICE="s"', [{ scheme: "bearer", params: { realm: "r", service: "s" } }]],
  ["spaces around = and after commas", 'Bearer realm = "r" ,  service= s', [{ scheme: "bearer", params: { realm: "r", service: "s" } }]],
  [
    "unquoted URL value",
    "Bearer realm=https://auth.example.com/token,service=reg",
    [{ scheme: "bearer", params: { realm: "https://auth.example.com/token", service: "reg" } }],
  ],
  ["escaped quote and backslash", 'Basic realm="say \\"hi\\" \\\\ bye"', [{ scheme: "basic", params: { realm: 'say "hi" \\ bye' } }]],
  ["empty quoted value", 'Bearer realm="r",scope=""', [{ scheme: "bearer", params: { realm: "r", scope: "" } }]],
  [
    "two challenges in one header (RFC 9110 example)",
    'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"',
    [
      { scheme: "newauth", params: { realm: "apps", type: "1", title: 'Login to "apps"' } },
      { scheme: "basic", params: { realm: "simple" } },
    ],
  ],
  [
    "challenges over several header lines",
    ['Basic realm="a"', 'Bearer realm="b",service="c"'],
    [
      { scheme: "basic", params: { realm: "a" } },
      { scheme: "bearer", params: { realm: "b", service: "c" } },
    ],
  ],
  [
    "a scheme without parameters, then another challenge",
    'Negotiate, Basic realm="x"',
    [
      { scheme: "negotiate", params: {} },
      { scheme: "basic", params: { realm: "x" } },
    ],
  ],
  [
    "token68 with padding",
    "Negotiate YWJjZA==, Basic realm=x",
    [
      { scheme: "negotiate", params: {}, token68: "YWJjZA==" },
      { scheme: "basic", params: { realm: "x" } },
    ],
  ],
  ["a repeated parameter keeps the first value", 'Bearer realm="first",realm="second"', [{ scheme: "bearer", params: { realm: "first" } }]],
  ["stray commas are ignored", ', Basic realm="x" ,,', [{ scheme: "basic", params: { realm: "x" } }]],
  ["empty header", "", []],
];

for (const [name, header, expected] of parses) {
  test(`parses: ${name}`, () => {
    assert.deepEqual(parseAuthChallenges(header), { ok: true, challenges: expected });
  });
}

const rejects: Array<[string, string, RegExp]> = [
  ["unterminated quoted value", 'Bearer realm="https://auth', /unterminated quoted value for parameter "realm"/],
  ["garbage after a value", 'Bearer realm="r" service="s"', /expected a comma after the value of "realm"/],
  ["no scheme", '="x"', /expected an authentication scheme/],
];

for (const [name, header, error] of rejects) {
  test(`rejects: ${name}`, () => {
    const result = parseAuthChallenges(header);
    assert.equal(result.ok, false);
    assert.match((result as { error: string }).error, error);
  });
}

test("chooses Bearer with a realm over Basic, keeping the service", () => {
  const parsed = parseAuthChallenges('Basic realm="b", Bearer realm="https://auth/token",service="svc"');
  assert.ok(parsed.ok);
  assert.deepEqual(chooseEndpointAuth(parsed.challenges), { ok: true, auth: { scheme: "bearer", realm: "https://auth/token", service: "svc" } });
});

test("falls back to Basic when the Bearer challenge has no realm", () => {
  const parsed = parseAuthChallenges('Bearer service="svc", Basic realm="b"');
  assert.ok(parsed.ok);
  assert.deepEqual(chooseEndpointAuth(parsed.challenges), { ok: true, auth: { scheme: "basic" } });
});

test("explains challenges it cannot answer", () => {
  const negotiate = parseAuthChallenges("Negotiate abc=");
  assert.ok(negotiate.ok);
  assert.deepEqual(chooseEndpointAuth(negotiate.challenges), {
    ok: false,
    error: "only unsupported authentication schemes (negotiate); Basic and Bearer are supported",
  });
  const noRealm = parseAuthChallenges('Bearer service="svc"');
  assert.ok(noRealm.ok);
  assert.match((chooseEndpointAuth(noRealm.challenges) as { error: string }).error, /without a realm/);
});
