// A value a request carried, quoted in an error about it: as JSON, shortened. The request is the sender's text
// and may be megabytes long; the error goes back in the answer and into the logs, where the start of the value
// says what was wrong as well as the whole would. Pure.

/** JSON of `value`, cut to `max` characters with "…" when longer. */
export function quotedValue(value: unknown, max = 80): string {
  const json = JSON.stringify(value) ?? String(value);
  return json.length > max ? `${json.slice(0, max)}… (${json.length} characters)` : json;
}
