// CEL (cel.dev) as an alternative to JMESPath conditions (`cel:` and `validate.cel`), on @bufbuild/cel.
// Parsed at load time (a syntax error is a load error), evaluated against JSON-shaped bindings; an expression
// that does not yield a boolean, or fails at run time (a missing key), is a failure with the reason.
import { CelScalar, celEnv, isCelError, parse, plan } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { celRegexEngine } from "./cel-matches.ts";

export interface CompiledCel {
  source: string;
  run: (bindings: Record<string, unknown>) => unknown;
}

/** Throws with the parser's reason. `variables` are the names the expression may use (any type). */
export function compileCel(source: string, variables: readonly string[]): CompiledCel {
  let parsed;
  try {
    parsed = parse(source);
  } catch (e) {
    throw new Error(`invalid CEL ${JSON.stringify(source)}: ${(e as Error).message.split("\n")[0]}`, { cause: e });
  }
  const env = celEnv({ funcs: strings, re2: celRegexEngine(parsed, source), variables: Object.fromEntries(variables.map((v) => [v, CelScalar.DYN])) });
  const program = plan(env, parsed);
  return { source, run: (bindings) => program(Object.fromEntries(Object.entries(bindings).map(([k, v]) => [k, toCel(v)])) as never) };
}

/** undefined when the expression yields true; otherwise why not. */
export function evaluateCel(cel: CompiledCel, bindings: Record<string, unknown>): string | undefined {
  const truth = celTruth(cel, bindings);
  if (truth === true) return undefined;
  if (truth === false) return `CEL ${JSON.stringify(cel.source)} is false`;
  return truth.error;
}

/** The boolean the expression yields, or why it yields none (an evaluation error, another type). */
export function celTruth(cel: CompiledCel, bindings: Record<string, unknown>): boolean | { error: string } {
  let result: unknown;
  try {
    result = cel.run(bindings);
  } catch (e) {
    return { error: `CEL ${JSON.stringify(cel.source)}: ${(e as Error).message}` };
  }
  if (isCelError(result)) return { error: `CEL ${JSON.stringify(cel.source)}: ${result.message}` };
  if (typeof result === "boolean") return result;
  return { error: `CEL ${JSON.stringify(cel.source)} gave ${typeof result}, not a boolean` };
}

// Verified statements come from the verifier's cache as the same objects on every admission: each is converted
// once (CEL never changes its inputs), so a condition over a large predicate costs its evaluation, not a copy.
const converted = new WeakMap<object, unknown>();

/** JSON values as CEL inputs: objects as maps (CEL's map type), integers stay doubles as JSON has no ints. */
function toCel(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  let cel = converted.get(value);
  if (cel === undefined) {
    cel = Array.isArray(value) ? value.map(toCel) : new Map(Object.entries(value).map(([k, v]) => [k, toCel(v)]));
    converted.set(value, cel);
  }
  return cel;
}
