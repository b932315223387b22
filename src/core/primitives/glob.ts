// The project's one glob engine: a pattern matched against a whole string, where "*" matches any run of
// characters (none included, newlines and "/" and "." too). Each caller picks the other wildcards its syntax has:
//
//   image patterns (image-pattern.ts)           "*" and "?"                 { anyChar: true }
//   credential keys (credentials/keyring.ts)    "*" and "[a-z0-9]" classes  { classes: true }, one host part at a time
//   PodRestriction value lists and map keys     "*" alone                   {}
//
// Every other character matches itself; there are no escapes ("\\" is an ordinary character). Characters are
// code points, so "?" matches one emoji, not half of it. Pure.
//
// Matching is linear in the text: the pattern is cut at each "*" into fixed-length pieces, each compiled to a
// regex without quantifiers, and the pieces are placed leftmost in turn (leftmost is optimal: a later placement
// leaves less room for the rest), so the work is at most the text's length times the pattern's, whatever a
// policy writes. A single regex with ".*" per star backtracks exponentially in the stars.

export interface GlobSyntax {
  /** "?" matches any one character; otherwise "?" is an ordinary character. */
  anyChar?: boolean;
  /**
   * "[…]" is a class of characters and ranges ("[a-z0-9]") as Go's filepath.Match reads one, without negation
   * or escapes; otherwise "[" is an ordinary character. A class that is empty, unclosed, or has a bare "-" or
   * "]" makes the whole pattern malformed; a reversed range ("[z-a]") matches nothing.
   */
  classes?: boolean;
}

export type GlobMatcher = (text: string) => boolean;

/** One character: its regex source ("a", "\.", ".", "[a-z]"). */
type One = { kind: "one"; regex: string };
type Token = { kind: "star" } | One;

/**
 * A matcher for `pattern`. Without classes every pattern is well-formed; with them, a malformed pattern gives
 * undefined (the caller decides: keys in a docker config that are malformed match nothing).
 */
export function compileGlob(pattern: string, syntax?: GlobSyntax & { classes?: false }): GlobMatcher;
export function compileGlob(pattern: string, syntax: GlobSyntax): GlobMatcher | undefined;
export function compileGlob(pattern: string, syntax: GlobSyntax = {}): GlobMatcher | undefined {
  if (!hasWildcard(pattern, syntax)) return (text) => text === pattern;
  const tokens = tokenize(pattern, syntax);
  if (tokens === undefined) return undefined;
  const pieces: One[][] = [[]];
  for (const token of tokens) {
    if (token.kind === "star") pieces.push([]);
    else pieces[pieces.length - 1]!.push(token);
  }
  const source = (piece: One[]): string => piece.map((t) => t.regex).join("");
  if (pieces.length === 1) {
    const whole = new RegExp(`^${source(pieces[0]!)}$`, "su");
    return (text) => whole.test(text);
  }
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  const head = first.length > 0 ? new RegExp(source(first), "suy") : undefined; // sticky: exactly at lastIndex
  const tail = last.length > 0 ? new RegExp(source(last), "suy") : undefined;
  const middles = pieces
    .slice(1, -1)
    .filter((p) => p.length > 0)
    .map((p) => new RegExp(source(p), "sug"));
  return (text) => {
    let position = 0;
    if (head) {
      head.lastIndex = 0;
      if (!head.test(text)) return false;
      position = head.lastIndex;
    }
    for (const middle of middles) {
      middle.lastIndex = position;
      const found = middle.exec(text);
      if (!found) return false;
      position = middle.lastIndex;
    }
    if (!tail) return true;
    // The tail is as many characters as it has tokens, counted back from the end.
    const tailStart = codePointsBack(text, last.length);
    if (tailStart < position) return false;
    tail.lastIndex = tailStart;
    return tail.test(text);
  };
}

/** Whether `pattern` has any wildcard of `syntax` ("*", and "?" or "[" if chosen). */
export function hasWildcard(pattern: string, syntax: GlobSyntax = {}): boolean {
  return pattern.includes("*") || (syntax.anyChar === true && pattern.includes("?")) || (syntax.classes === true && pattern.includes("["));
}

function tokenize(pattern: string, syntax: GlobSyntax): Token[] | undefined {
  const chars = [...pattern];
  const tokens: Token[] = [];
  let i = 0;
  // One character of a class; undefined where Go reports a bad pattern.
  const classChar = (): string | undefined => {
    const c = chars[i];
    if (c === undefined || c === "-" || c === "]") return undefined;
    i++;
    return c;
  };
  while (i < chars.length) {
    const c = chars[i++]!;
    if (c === "*") tokens.push({ kind: "star" });
    else if (c === "?" && syntax.anyChar) tokens.push({ kind: "one", regex: "." });
    else if (c === "[" && syntax.classes) {
      let ranges = "";
      let count = 0;
      for (;;) {
        if (chars[i] === "]" && count > 0) {
          i++;
          break;
        }
        const lo = classChar();
        if (lo === undefined) return undefined;
        let hi = lo;
        if (chars[i] === "-") {
          i++;
          const end = classChar();
          if (end === undefined) return undefined;
          hi = end;
        }
        count++;
        if (lo.codePointAt(0)! <= hi.codePointAt(0)!) ranges += lo === hi ? escapeInClass(lo) : `${escapeInClass(lo)}-${escapeInClass(hi)}`;
      }
      tokens.push({ kind: "one", regex: `[${ranges}]` }); // "[]" (only reversed ranges) matches nothing
    } else tokens.push({ kind: "one", regex: escape(c) });
  }
  return tokens;
}

// With the "u" flag only syntax characters may be escaped, and "-" only inside a class.
const escape = (c: string): string => c.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
const escapeInClass = (c: string): string => c.replace(/[\\^$.*+?()[\]{}|/-]/g, "\\$&");

/** The index `count` code points before the end of `text` (-1 when it has fewer). */
function codePointsBack(text: string, count: number): number {
  let index = text.length;
  for (let n = 0; n < count; n++) {
    if (index <= 0) return -1;
    const low = text.charCodeAt(index - 1);
    const high = index >= 2 ? text.charCodeAt(index - 2) : 0;
    index -= low >= 0xdc00 && low <= 0xdfff && high >= 0xd800 && high <= 0xdbff ? 2 : 1;
  }
  return index;
}
