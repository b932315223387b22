// WWW-Authenticate parsing at its edges (tabs, token68 padding, a scheme glued to what follows) and the choice
// of the challenge to answer: each case is an input a registry may send and what the client makes of it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chooseEndpointAuth, parseAuthChallenges, sameEndpointAuth, type AuthChallenge, type EndpointAuth } from "../../../src/registry/auth-challenge.ts";

const parses: Array<[string, AuthChallenge[]]> = [
  ["Basic", [{ scheme: "basic", params: {} }]],
  ['Bearer realm\t=\t"r"', [{ scheme: "bearer", params: { realm: "r" } }]],
  ['Bearer realm= "r",service =\t"s"', [{ scheme: "bearer", params: { realm: "r", service: "s" } }]],
  // Token68 padding is not a parameter, at the end or before the next challenge.
  ["Negotiate YWJj=", [{ scheme: "negotiate", params: {}, token68: "YWJj=" }]],
  ["Negotiate YWJj==", [{ scheme: "negotiate", params: {}, token68: "YWJj==" }]],
  // Padding followed by blanks and a comma is still padding.
  [
    "Negotiate YWJj= , Basic",
    [
      { scheme: "negotiate", params: {}, token68: "YWJj=" },
      { scheme: "basic", params: {} },
    ],
  ],
  [
    "Negotiate YWJj=\t, Basic",
    [
      { scheme: "negotiate", params: {}, token68: "YWJj=" },
      { scheme: "basic", params: {} },
    ],
  ],
  [
    'Negotiate YWJj=, Basic realm="r"',
    [
      { scheme: "negotiate", params: {}, token68: "YWJj=" },
      { scheme: "basic", params: { realm: "r" } },
    ],
  ],
];

for (const [header, expected] of parses) {
  test(`parses ${JSON.stringify(header)}`, () => {
    assert.deepEqual(parseAuthChallenges(header), { ok: true, challenges: expected });
  });
}

const refusals: Array<[string, string]> = [
  ['Bearer"realm"', 'expected a space after the scheme "Bearer" at position 6'],
  ["Basic =abc", "expected a comma after the token at position 7"],
  ['Basic "x"', 'expected parameters or a token after the scheme "Basic" at position 6'],
  ["Negotiate abc def", "expected a comma after the token at position 14"],
];

for (const [header, error] of refusals) {
  test(`refuses ${JSON.stringify(header)}`, () => {
    assert.deepEqual(parseAuthChallenges(header), { ok: false, error });
  });
}

test("chosen challenge: a Bearer realm without a service has no service; reasons when none is usable", () => {
  assert.deepEqual(chooseEndpointAuth([{ scheme: "bearer", params: { realm: "https://auth/token" } }]), {
    ok: true,
    auth: { scheme: "bearer", realm: "https://auth/token" },
  });
  const realmless = { ok: false, error: "a Bearer challenge without a realm (the token service's URL)" };
  assert.deepEqual(chooseEndpointAuth([{ scheme: "bearer", params: { service: "s" } }]), realmless);
  assert.deepEqual(
    chooseEndpointAuth([
      { scheme: "bearer", params: {} },
      { scheme: "negotiate", params: {}, token68: "x" },
    ]),
    realmless,
  );
  assert.deepEqual(
    chooseEndpointAuth([
      { scheme: "negotiate", params: {} },
      { scheme: "ntlm", params: {} },
    ]),
    { ok: false, error: "only unsupported authentication schemes (negotiate, ntlm); Basic and Bearer are supported" },
  );
  assert.deepEqual(chooseEndpointAuth([]), { ok: false, error: "no authentication challenge" });
});

test("two endpoint auths are the same only with the same scheme and, for Bearer, the same realm and service", () => {
  const bearer = (realm: string, service?: string): EndpointAuth =>
    service === undefined ? { scheme: "bearer", realm } : { scheme: "bearer", realm, service };
  const same: Array<[EndpointAuth, EndpointAuth]> = [
    [{ scheme: "basic" }, { scheme: "basic" }],
    [{ scheme: "none" }, { scheme: "none" }],
    [bearer("r", "s"), bearer("r", "s")],
    [bearer("r"), bearer("r")],
  ];
  const different: Array<[EndpointAuth, EndpointAuth]> = [
    [{ scheme: "basic" }, { scheme: "none" }],
    [{ scheme: "basic" }, bearer("r")],
    [bearer("r"), { scheme: "basic" }],
    [bearer("r", "s"), bearer("other", "s")],
    [bearer("r", "s"), bearer("r", "other")],
    [bearer("r", "s"), bearer("r")],
  ];
  for (const [a, b] of same) assert.equal(sameEndpointAuth(a, b), true, `${JSON.stringify(a)} ${JSON.stringify(b)}`);
  for (const [a, b] of different) assert.equal(sameEndpointAuth(a, b), false, `${JSON.stringify(a)} ${JSON.stringify(b)}`);
});
