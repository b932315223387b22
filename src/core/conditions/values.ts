// Kubernetes quantities ("100Mi", "1.5Gi", "500m"), which conditions compare as such (the image-verification
// design's operators); durations are src/core/primitives/duration.ts. Pure.

// Decimal suffixes are powers of ten, folded into the number's exponent so that it is parsed once: "2.3u" and
// "2300n" are then the same number, as they are the same quantity to Kubernetes (a product such as 2.3 × 1e-6 is
// not exactly 2300 × 1e-9). Binary suffixes multiply by a power of two, which is exact.
const DECIMAL_EXPONENTS: Record<string, number> = { "": 0, n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_EXPONENTS: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$/;

/** The value of a Kubernetes quantity with a unit ("100Mi", "500m"); plain numbers are not quantities here. */
export function parseQuantity(text: string): number | undefined {
  const m = QUANTITY.exec(text);
  if (!m || (m[3] === undefined && m[2] === undefined)) return undefined;
  const suffix = m[3] ?? "";
  const exponent = Number(m[2] ?? 0) + (DECIMAL_EXPONENTS[suffix] ?? 0);
  return Number(`${m[1]}e${exponent}`) * 2 ** (BINARY_EXPONENTS[suffix] ?? 0);
}
