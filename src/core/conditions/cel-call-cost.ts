// What one CEL function call costs, in cel-go's units: the same table for the estimate at load (sizes are the
// largest a value can be) and for the count at run time (sizes are the values'), as cel-go's checker/cost.go and
// interpreter/runtimecost.go (and kube-apiserver's library/cost.go for the strings extension) price them. A call
// whose work grows with its operands costs in proportion to their sizes; every other call costs 1.
import { REGEX_STRING_LENGTH_COST_FACTOR, STRING_TRAVERSAL_COST_FACTOR } from "./cel-cost-limits.ts";

/** How big a value is, or may be: as a string or bytes (characters), as a list (items), as a map (entries). */
export interface Measure {
  text?: number;
  items?: number;
  entries?: number;
}

/** Functions whose cost depends on the size of what they return: counted after the call at run time. */
export const COSTED_BY_RESULT: ReadonlySet<string> = new Set(["join"]);

/** cel-go's size of a value: the length of a string, bytes, list or map; 1 for anything else. */
export function sizeOf(m: Measure): number {
  return Math.max(m.text ?? 1, m.items ?? 1, m.entries ?? 1);
}

const traversal = (size: number) => Math.ceil(size * STRING_TRAVERSAL_COST_FACTOR);

/**
 * The cost of calling `fn` (its name as the parser writes it: "_==_", "@in", "startsWith") on a receiver (for
 * methods) and arguments; `result` is needed only for the functions in COSTED_BY_RESULT. At least 1.
 */
export function callCost(fn: string, target: Measure | undefined, args: readonly Measure[], result?: Measure): number {
  // As cel-go passes them: the receiver first.
  const [a = {}, b = {}] = target ? [target, ...args] : args;
  return Math.max(1, operandCost(fn, a, b, result ?? {}));
}

function operandCost(fn: string, a: Measure, b: Measure, result: Measure): number {
  switch (fn) {
    case "_==_":
    case "_!=_":
    case "_<_":
    case "_<=_":
    case "_>_":
    case "_>=_":
      // Comparing stops at the end of the shorter operand.
      return traversal(Math.min(sizeOf(a), sizeOf(b)));
    case "_+_":
      // Strings and bytes are copied; lists are joined without copying.
      return a.text !== undefined && b.text !== undefined ? traversal(a.text + b.text) : 1;
    case "@in":
      // A list is searched; a map is looked up.
      return b.items ?? 1;
    case "matches":
      // RE2 is linear in the text, times the pattern's size (cel-go guesses 4 characters per regex term).
      return traversal(1 + sizeOf(a)) * Math.ceil(sizeOf(b) * REGEX_STRING_LENGTH_COST_FACTOR);
    case "contains":
    case "indexOf":
    case "lastIndexOf":
      return traversal(sizeOf(a)) * traversal(sizeOf(b));
    case "startsWith":
    case "endsWith":
      // The prefix or suffix is compared, as cel-go's estimate has it.
      return traversal(sizeOf(b));
    case "lowerAscii":
    case "upperAscii":
    case "trim":
    case "substring":
    case "charAt":
    case "format":
    case "strings.quote":
    case "string":
    case "bytes":
      return traversal(sizeOf(a));
    case "replace":
    case "split":
      // The traversal, and the result built.
      return traversal(2 * sizeOf(a));
    case "join":
      return traversal(2 * sizeOf(result));
    default:
      return 1;
  }
}
