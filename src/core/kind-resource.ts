// The resource a kind is served as, when there is no API discovery to ask (`check` offline, webhook rules for the
// kinds imagePaths name). Kubernetes' own guess (meta.UnsafeGuessKindToResource: lower case, "es" after "s",
// "ies" for a final "y", "s" otherwise, "endpoints" unchanged) turns Gateway into "gatewaies"; CRD authors
// write "gateways", so a "y" after a vowel takes a plain "s" here. Built-in kinds come out the same either way.
export function guessResource(kind: string): string {
  if (kind === "") return "";
  const lower = kind.toLowerCase();
  if (lower.endsWith("endpoints")) return lower;
  if (lower.endsWith("s")) return `${lower}es`;
  if (/[^aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}
