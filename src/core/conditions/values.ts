// Kubernetes quantities ("100Mi", "1.5Gi", "500m"), which conditions compare as such (the image-verification
// design's operators); durations are src/core/duration.ts. Pure.

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
