// ImageRestriction: the registry, repository, tag and digest of a container image, parsed with the
// project's one reference grammar (so "nginx" is registry "docker.io", repository "library/nginx", tag
// "latest"). The seed calls the repository "image". A container's `image` restriction is a list of
// alternatives: the image must satisfy one of them.
import { parseImageReferenceCached, effectiveTag } from "../image-reference.ts";
import { anyOf } from "./struct-restriction.ts";
import { compileStringRestriction } from "./restrictions/string-restriction.ts";
import { finding, readListOrOne, readMapping, type Check, type CompileContext, type RawPath } from "./restrictions/restriction-support.ts";

const PARTS = ["registry", "repository", "tag", "digest"] as const;
type Part = (typeof PARTS)[number];

export function compileImageRestrictions(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const alternatives = readListOrOne(raw, path, cx)
    .map(({ raw: item, path: p }) => compileImageRestriction(item, p, cx))
    .filter((c): c is Check => c !== undefined);
  return alternatives.length > 0 ? anyOf(alternatives) : undefined;
}

function compileImageRestriction(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const obj = readMapping(raw, path, cx, PARTS, { image: "repository" });
  if (!obj) return undefined;
  const rule = cx.rule(path);
  // Registry and repository are always present once parsed; tag is absent for a digest-only reference.
  const parts: Array<{ part: Part; check: Check }> = [];
  for (const part of PARTS) {
    if (obj[part] === undefined) continue;
    const compiled = compileStringRestriction(obj[part], [...path, part], cx, { pointer: part === "tag" || part === "digest" }, cx.rule([...path, part]));
    if (compiled) parts.push({ part, check: compiled.check });
  }
  return (at, ecx, out) => {
    if (typeof at.value !== "string") {
      out.push(finding(at, rule, "has no image"));
      return;
    }
    const parsed = parseImageReferenceCached(at.value);
    if (!parsed.ok) {
      out.push(finding(at, rule, parsed.error));
      return;
    }
    const ref = parsed.ref;
    const value: Record<Part, string | undefined> = { registry: ref.registry, repository: ref.repository, tag: effectiveTag(ref), digest: ref.digest };
    for (const { part, check } of parts) check({ value: value[part], field: `${at.field} (${part})` }, ecx, out);
  };
}
