// Field paths as Kubernetes prints them: "spec.containers[1].securityContext.privileged".

export function formatFieldPath(segments: ReadonlyArray<string | number>): string {
  let out = "";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else out += out ? `.${s}` : s;
  }
  return out;
}
