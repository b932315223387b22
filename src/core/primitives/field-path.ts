// Field paths as Kubernetes prints them: "spec.containers[1].securityContext.privileged".

export function formatFieldPath(segments: ReadonlyArray<string | number>): string {
  let out = "";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else out += out ? `.${s}` : s;
  }
  return out;
}

/**
 * The RFC 6901 JSON pointer of a field path: "spec.containers[1].image" → "/spec/containers/1/image".
 * Field names in these paths come from the Pod schema and template paths, which never contain "." or "[".
 */
export function fieldPathToPointer(field: string): string {
  if (field === "") return "";
  return field
    .replace(/\[(\d+)\]/g, ".$1")
    .split(".")
    .map((segment) => `/${escapePointerSegment(segment)}`)
    .join("");
}

/** "~" and "/" are the two characters a pointer segment must escape (annotation keys contain "/"). */
export function escapePointerSegment(segment: string): string {
  return segment.replace(/~/g, "~0").replace(/\//g, "~1");
}
