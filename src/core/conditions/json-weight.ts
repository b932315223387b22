// How much work reading a JSON value costs, in the units a CostMeter counts, for the steps of an evaluation that
// read values they are handed: a JMESPath `==`, to_string(), a condition's operator comparing what two
// expressions found, a denial quoting it. A value an expression built may share parts (`[@, @]` holds the same
// array twice; repeated, such a value is exponentially large yet small in memory), so the weight counts a shared
// part each time it appears, as a reader walking it would; it is remembered per object, so learning it walks
// each object once. Pure.
import type { CostMeter } from "./cost-meter.ts";
import { STRING_TRAVERSAL_COST_FACTOR } from "./cel-cost-limits.ts";

/** What reading a string costs: as CEL counts it, a tenth of a unit per character. */
export function stringCost(text: string): number {
  return Math.ceil(text.length * STRING_TRAVERSAL_COST_FACTOR);
}

/**
 * What one step costs that reads a value without descending into it: a string's characters, an array's items,
 * an object's entries (Object.keys lists them all; the count is remembered), nothing for anything else.
 */
export class ShallowSizes {
  // Made at the first object: most evaluations read only strings and numbers, and a WeakMap is not free.
  #entries: WeakMap<object, number> | undefined;

  of(value: unknown): number {
    if (typeof value === "string") return stringCost(value);
    if (Array.isArray(value)) return value.length;
    if (typeof value !== "object" || value === null) return 0;
    this.#entries ??= new WeakMap();
    let entries = this.#entries.get(value);
    if (entries === undefined) this.#entries.set(value, (entries = Object.keys(value).length));
    return entries;
  }
}

/**
 * Deep weights, each learnt once: walking an object not met before charges `meter` its shallow size, so what a
 * weight costs to learn is counted like any other work.
 */
export class DeepWeights {
  // Made at the first array or object, as ShallowSizes' map.
  #known: WeakMap<object, number> | undefined;
  readonly #meter: CostMeter;

  constructor(meter: CostMeter) {
    this.#meter = meter;
  }

  /** 1 for a number, boolean or null; 1 and its reading cost for a string; 1 and its items' or entries' weights for an array or object. */
  of(value: unknown): number {
    if (typeof value === "string") return 1 + stringCost(value);
    if (typeof value !== "object" || value === null) return 1;
    this.#known ??= new WeakMap();
    const known = this.#known.get(value);
    if (known !== undefined) return known;
    let weight = 1;
    if (Array.isArray(value)) {
      this.#meter.charge(value.length);
      for (const item of value) weight += this.of(item);
    } else {
      const entries = Object.values(value);
      this.#meter.charge(entries.length);
      for (const item of entries) weight += 1 + this.of(item);
    }
    this.#known.set(value, weight);
    return weight;
  }
}
