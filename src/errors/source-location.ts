// How a problem in a file a person wrote is shown, for every such file (policies, the server configuration,
// the registries and namespaces files): "file:line (details): message", e.g.
//   config.yaml:12 (cache.allowTTL): must be a duration such as "30s", "5m" or "1h", got "soon"
//   policies/a.yaml:6 (document 1, spec.surprise): unknown field "surprise"

export interface SourceLocation {
  /** The file as the user named it; absent for settings that did not come from a file. */
  file?: string;
  /** 1-based line, when known. */
  line?: number;
  /** Shown in parentheses, in order, the empty ones left out: "document 2", a field path. */
  details?: ReadonlyArray<string | undefined>;
}

export function renderAtLocation(at: SourceLocation, message: string): string {
  const where = `${at.file ?? ""}${at.file !== undefined && at.line !== undefined ? `:${at.line}` : ""}`;
  const detail = (at.details ?? []).filter((d) => d !== undefined && d !== "").join(", ");
  const prefix = [where, detail ? `(${detail})` : ""].filter(Boolean).join(" ");
  return prefix ? `${prefix}: ${message}` : message;
}
