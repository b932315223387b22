// Values that conditions compare "as such" (the image-verification design's operators): Go-style durations
// ("24h", "1h30m", "90s") and Kubernetes quantities ("100Mi", "1.5Gi", "500m"). Pure.

const DURATION_UNITS: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
const DURATION = /^([-+]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$/;
const DURATION_PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g;

/** Seconds of a Go duration string; undefined when it is not one. "0" is zero. */
export function parseDuration(text: string): number | undefined {
  if (text === "0") return 0;
  const m = DURATION.exec(text);
  if (!m) return undefined;
  let seconds = 0;
  for (const part of text.matchAll(DURATION_PART)) seconds += Number(part[1]) * DURATION_UNITS[part[2]!]!;
  return m[1] === "-" ? -seconds : seconds;
}

/** A duration as Go prints it: "27h3m4s", "1.5s", "0s". */
export function formatDuration(seconds: number): string {
  if (seconds === 0) return "0s";
  const sign = seconds < 0 ? "-" : "";
  let rest = Math.abs(seconds);
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const m = Math.floor(rest / 60);
  rest -= m * 60;
  const s = Math.round(rest * 1e9) / 1e9;
  return `${sign}${h > 0 ? `${h}h` : ""}${h > 0 || m > 0 ? `${m}m` : ""}${s}s`;
}

const QUANTITY_SUFFIXES: Record<string, number> = {
  "": 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};
const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$/;

/** The value of a Kubernetes quantity with a unit ("100Mi", "500m"); plain numbers are not quantities here. */
export function parseQuantity(text: string): number | undefined {
  const m = QUANTITY.exec(text);
  if (!m || (m[3] === undefined && m[2] === undefined)) return undefined;
  return Number(m[1]) * 10 ** Number(m[2] ?? 0) * QUANTITY_SUFFIXES[m[3] ?? ""]!;
}
