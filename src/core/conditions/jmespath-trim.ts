// JMESPath's trim(), trim_left() and trim_right() (JEP-14 string functions) in time linear in the string. The
// library builds them from regular expressions, /(.*?)[chars]*$/ for the right end, which backtrack
// quadratically: a 200,000-character name of spaces ending in "x" took half a minute in a filter of a policy's
// path. These give the library's results exactly, in one pass from each end: `chars` is a set of UTF-16 code
// units (as the library's character class is), and when it is missing or empty the set is JavaScript's
// whitespace (\s) and U+0085.

// \s of JavaScript's regular expressions, and U+0085 (NEXT LINE), which the library adds.
const WHITESPACE = new Set(
  [0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff].concat(
    Array.from({ length: 0x200a - 0x2000 + 1 }, (_, i) => 0x2000 + i),
  ),
);

function unitsOf(chars: string | undefined): Set<number> {
  if (!chars) return WHITESPACE;
  return new Set(Array.from({ length: chars.length }, (_, i) => chars.charCodeAt(i)));
}

export function trimLeft(subject: string, chars?: string): string {
  const set = unitsOf(chars);
  let start = 0;
  while (start < subject.length && set.has(subject.charCodeAt(start))) start++;
  return subject.slice(start);
}

export function trimRight(subject: string, chars?: string): string {
  const set = unitsOf(chars);
  let end = subject.length;
  while (end > 0 && set.has(subject.charCodeAt(end - 1))) end--;
  return subject.slice(0, end);
}

export function trim(subject: string, chars?: string): string {
  return trimLeft(trimRight(subject, chars), chars);
}
