// The message for a field a kind does not know, with the known field it most likely meant: a typo such as
// `imagePath` or `Images` names its fix instead of leaving the user to compare spellings.

/** The one known field close to `key` (case aside, or a small edit distance); none when no or several are close. */
export function closestField(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const sameButCase = known.filter((k) => k.toLowerCase() === lower);
  if (sameButCase.length > 0) return sameButCase.length === 1 ? sameButCase[0] : undefined;
  // One edit for short names, two from six letters on: close enough to be a slip, far enough not to guess.
  const limit = key.length < 6 ? 1 : 2;
  let best: string[] = [];
  let bestDistance = limit + 1;
  for (const candidate of known) {
    const d = editDistance(lower, candidate.toLowerCase(), limit);
    if (d > limit) continue; // too far to be a slip, even when it is the only known field
    if (d < bestDistance) [best, bestDistance] = [[candidate], d];
    else if (d === bestDistance) best.push(candidate);
  }
  return best.length === 1 ? best[0] : undefined;
}

/** `unknown field "imagess"; did you mean "images"?`, or without the question when no one field is close. */
export function unknownFieldMessage(key: string, known: readonly string[]): string {
  return `unknown field ${JSON.stringify(key)}${didYouMean(key, known)}`;
}

/** `unknown field "imagess"; known fields: images, action; did you mean "images"?`, for sections of few fields. */
export function unknownFieldListingKnown(key: string, known: readonly string[]): string {
  return `unknown field ${JSON.stringify(key)}; known fields: ${known.join(", ")}${didYouMean(key, known)}`;
}

/** `; did you mean "images"?` when one known field is close to `key`, else "". */
export function didYouMean(key: string, known: readonly string[]): string {
  const close = closestField(key, known);
  return close === undefined ? "" : `; did you mean ${JSON.stringify(close)}?`;
}

/** Levenshtein distance with adjacent transpositions counted as one edit; anything above `limit` is limit + 1. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      current.push(d);
    }
    [before, previous] = [previous, current];
  }
  return Math.min(previous[b.length]!, limit + 1);
}
