// Go-style durations ("500ms", "30s", "1h30m", "1.5h", "-2m"), as Kubernetes (`?timeout=10s`), the server's
// configuration and the image-verification design's conditions write them. In milliseconds. Pure.

const UNIT_MS: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION = /^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$/;
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g;

/** Milliseconds of a Go duration; undefined when the text is not one. "0" is zero, as in Go. */
export function parseDuration(text: string): number | undefined {
  if (text === "0") return 0;
  if (!DURATION.test(text)) return undefined;
  let ms = 0;
  for (const part of text.matchAll(PART)) ms += Number(part[1]) * UNIT_MS[part[2]!]!;
  return text.startsWith("-") ? -ms : ms;
}

/** A duration as Go prints it: "27h3m4s", "1.5s", "0s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  const sign = ms < 0 ? "-" : "";
  let rest = Math.abs(ms) / 1000;
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const m = Math.floor(rest / 60);
  rest -= m * 60;
  const s = Math.round(rest * 1e9) / 1e9;
  return `${sign}${h > 0 ? `${h}h` : ""}${h > 0 || m > 0 ? `${m}m` : ""}${s}s`;
}
