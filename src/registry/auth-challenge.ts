// WWW-Authenticate challenges (RFC 9110 §11.6.1) and the one this client answers. Pure: no I/O.
//
//   WWW-Authenticate = #challenge
//   challenge        = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//   auth-param       = token BWS "=" BWS ( token / quoted-string )
//
// A comma separates both parameters and challenges, and may sit inside a quoted value: the Docker token
// spec's own example is scope="repository:samalba/my-app:pull,push". After a comma, a parameter is
// `name =`; anything else starts the next challenge.

export interface AuthChallenge {
  /** Lowercased: "bearer", "basic". */
  scheme: string;
  /** Parameter names lowercased (they are case-insensitive); values unquoted and unescaped. */
  params: Record<string, string>;
  /** The token68 form ("Negotiate abc=="), which carries no parameters. */
  token68?: string;
}

export type ChallengeParseResult = { ok: true; challenges: AuthChallenge[] } | { ok: false; error: string };

const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;
const TOKEN68_CHAR = /[A-Za-z0-9\-._~+/]/;
// Registries are not always strict: an unquoted value runs to the next space, comma or quote
// (realm=https://auth.example.com/token is common and unambiguous).
const UNQUOTED_VALUE_CHAR = /[^\s,"]/;

/** Parses one header value, or several header lines (they are equivalent to one comma-joined value). */
export function parseAuthChallenges(header: string | string[]): ChallengeParseResult {
  const text = Array.isArray(header) ? header.join(", ") : header;
  const challenges: AuthChallenge[] = [];
  let i = 0;
  const at = (k: number): string => text.charAt(k);
  const fail = (what: string): ChallengeParseResult => ({ ok: false, error: `${what} at position ${i}` });
  const skip = (chars: RegExp): number => {
    const start = i;
    while (i < text.length && chars.test(at(i))) i++;
    return i - start;
  };
  const read = (chars: RegExp): string => {
    const start = i;
    skip(chars);
    return text.slice(start, i);
  };

  /** At `from`: `token BWS "="` not followed by "=" (which would be token68 padding)? */
  const paramAhead = (from: number): boolean => {
    let k = from;
    while (k < text.length && TCHAR.test(at(k))) k++;
    if (k === from) return false;
    while (at(k) === " " || at(k) === "\t") k++;
    if (at(k) !== "=") return false;
    k++;
    while (at(k) === " " || at(k) === "\t") k++;
    return k < text.length && at(k) !== "=" && at(k) !== ",";
  };

  const readValue = (): string | undefined => {
    if (at(i) !== '"') return read(UNQUOTED_VALUE_CHAR);
    i++;
    let value = "";
    while (i < text.length) {
      const c = at(i);
      if (c === '"') {
        i++;
        return value;
      }
      if (c === "\\") {
        i++;
        if (i >= text.length) break;
      }
      value += at(i);
      i++;
    }
    return undefined;
  };

  for (;;) {
    skip(/[\s,]/);
    if (i >= text.length) break;
    const scheme = read(TCHAR);
    if (scheme === "") return fail(`expected an authentication scheme, found ${JSON.stringify(at(i))}`);
    const challenge: AuthChallenge = { scheme: scheme.toLowerCase(), params: {} };
    challenges.push(challenge);
    const spaces = skip(/[ \t]/);
    if (i >= text.length || at(i) === ",") continue;
    if (spaces === 0) return fail(`expected a space after the scheme ${JSON.stringify(scheme)}`);

    if (!paramAhead(i)) {
      const token68 = read(TOKEN68_CHAR) + read(/=/);
      if (token68 === "") return fail(`expected parameters or a token after the scheme ${JSON.stringify(scheme)}`);
      challenge.token68 = token68;
      skip(/[ \t]/);
      if (i < text.length && at(i) !== ",") return fail("expected a comma after the token");
      continue;
    }

    // Parameters until the text ends or what follows a comma is not `name =` (the next challenge).
    for (;;) {
      const name = read(TCHAR).toLowerCase();
      skip(/[ \t]/);
      i++; // the "=" that paramAhead saw
      skip(/[ \t]/);
      const value = readValue();
      if (value === undefined) return fail(`unterminated quoted value for parameter ${JSON.stringify(name)}`);
      // A repeated parameter is invalid; the first one stands so a later one cannot override it.
      if (!Object.hasOwn(challenge.params, name)) challenge.params[name] = value;
      skip(/[ \t]/);
      if (i >= text.length) break;
      if (at(i) !== ",") return fail(`expected a comma after the value of ${JSON.stringify(name)}`);
      skip(/[\s,]/);
      if (!paramAhead(i)) break;
    }
  }
  return { ok: true, challenges };
}

/** How an endpoint wants requests authorized, as learned from its challenges. */
export type EndpointAuth = { scheme: "none" } | { scheme: "basic" } | { scheme: "bearer"; realm: string; service?: string };

/**
 * The challenge this client answers: Bearer (with a realm) over Basic, as Docker does; other schemes are
 * not supported. Returns the reason when none is usable.
 */
export function chooseEndpointAuth(challenges: AuthChallenge[]): { ok: true; auth: EndpointAuth } | { ok: false; error: string } {
  const bearer = challenges.find((c) => c.scheme === "bearer" && c.params.realm);
  if (bearer) {
    const auth: EndpointAuth = { scheme: "bearer", realm: bearer.params.realm as string };
    if (bearer.params.service !== undefined) auth.service = bearer.params.service;
    return { ok: true, auth };
  }
  if (challenges.some((c) => c.scheme === "basic")) return { ok: true, auth: { scheme: "basic" } };
  if (challenges.some((c) => c.scheme === "bearer")) return { ok: false, error: "a Bearer challenge without a realm (the token service's URL)" };
  const schemes = challenges.map((c) => c.scheme);
  return {
    ok: false,
    error: schemes.length ? `only unsupported authentication schemes (${schemes.join(", ")}); Basic and Bearer are supported` : "no authentication challenge",
  };
}

export function sameEndpointAuth(a: EndpointAuth, b: EndpointAuth): boolean {
  if (a.scheme !== b.scheme) return false;
  if (a.scheme === "bearer" && b.scheme === "bearer") return a.realm === b.realm && a.service === b.service;
  return true;
}
