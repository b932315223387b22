// CEL (cel.dev) as an alternative to JMESPath conditions (`cel:` and `validate.cel`), on @bufbuild/cel.
// Parsed at load time (a syntax error is a load error), evaluated against JSON-shaped bindings; an expression
// that does not yield a boolean, or fails at run time (a missing key), is a failure with the reason.
//
// With kube-apiserver's limits: an expression whose estimated worst case passes STATIC_ESTIMATED_COST_LIMIT is a
// load error (cel-cost-estimate.ts); an evaluation is ended when it passes PER_CALL_COST_LIMIT, or what is left of
// the budget its caller shares among several (cost-meter.ts, counted as cel-cost-meter.ts says), or the review's deadline passes
// (evaluation-deadline.ts), and fails with the reason.
import { celLibrary } from "./cel-library.ts";
import { celRegexEngine, globalMatches } from "./cel-matches.ts";
import { estimateCost } from "./cel-cost-estimate.ts";
import { ConditionError } from "./condition-error.ts";
import { STATIC_ESTIMATED_COST_LIMIT } from "./cel-cost-limits.ts";
import { meteredEnv, metered } from "./cel-cost-meter.ts";
import { CostMeter, type CostBudget } from "./cost-meter.ts";
import { evaluationPastDeadline, PAST_DEADLINE_REASON } from "./evaluation-deadline.ts";

export { CostBudget } from "./cost-meter.ts";

export interface CompiledCel {
  source: string;
  /** The most one evaluation can cost, on data no larger than a request kube-apiserver accepts. */
  estimatedCost: number;
  /** The value, or a CelError; `meter` counts the cost and ends the evaluation past its limit. */
  run: (bindings: Record<string, unknown>, meter: CostMeter) => unknown;
}

/** Throws with the parser's reason, or the estimated cost over the limit. `variables` are the names the expression may use (any type). */
export function compileCel(source: string, variables: readonly string[]): CompiledCel {
  const { CelScalar, celEnv, parse, plan, strings } = celLibrary();
  let parsed;
  try {
    parsed = parse(source);
  } catch (e) {
    throw new ConditionError("invalid-cel", `invalid CEL ${JSON.stringify(source)}: ${(e as Error).message.split("\n")[0]}`, { cause: e });
  }
  const estimatedCost = estimateCost(parsed.expr, variables);
  if (estimatedCost > STATIC_ESTIMATED_COST_LIMIT) throw new ConditionError("cost-limit", `CEL ${JSON.stringify(source)}: ${overBudget(estimatedCost)}`);
  const regex = celRegexEngine(parsed, source);
  const env = celEnv({ funcs: [...strings, globalMatches(regex)], re2: regex, variables: Object.fromEntries(variables.map((v) => [v, CelScalar.DYN])) });
  // The evaluation under way: evaluation is synchronous, so at most one at a time uses this program's meter.
  let current: CostMeter | undefined;
  const program = plan(
    meteredEnv(env, () => current!),
    metered(parsed.expr, variables),
  );
  return {
    source,
    estimatedCost,
    run: (bindings, meter) => {
      current = meter;
      try {
        return program(Object.fromEntries(Object.entries(bindings).map(([k, v]) => [k, toCel(v)])) as never);
      } finally {
        current = undefined;
        meter.settle();
      }
    },
  };
}

/** kube-apiserver's words for an estimate over the limit, with the numbers. */
function overBudget(cost: number): string {
  const factor = cost / STATIC_ESTIMATED_COST_LIMIT;
  // As kube-apiserver words it: a factor near 1 with more digits, so it never reads "by factor of 1.0x".
  const by = factor > 100 ? "more than 100x" : factor < 1.5 ? `${factor.toFixed(6)}x` : `${factor.toFixed(1)}x`;
  const estimate = cost < 1e15 ? String(Math.ceil(cost)) : cost.toExponential(1);
  return (
    `estimated cost ${estimate} exceeds budget by factor of ${by}: at most ${STATIC_ESTIMATED_COST_LIMIT} is allowed, ` +
    `counting every list, map and string of the request as large as a 3 MiB request allows ` +
    `(try simplifying the expression: a loop over a list inside a loop over another is refused)`
  );
}

/** undefined when the expression yields true; otherwise why not. */
export function evaluateCel(cel: CompiledCel, bindings: Record<string, unknown>, budget?: CostBudget): string | undefined {
  const truth = celTruth(cel, bindings, budget);
  if (truth === true) return undefined;
  if (truth === false) return `CEL ${JSON.stringify(cel.source)} is false`;
  return truth.error;
}

/**
 * The boolean the expression yields, or why it yields none (an evaluation error, another type, the cost limit of
 * one evaluation or of the `budget` it shares with others: kube-apiserver's PerCallLimit and cost budgets).
 */
export function celTruth(cel: CompiledCel, bindings: Record<string, unknown>, budget?: CostBudget): boolean | { error: string } {
  // Past the review's deadline nothing more is evaluated, however cheap (evaluation-deadline.ts).
  if (evaluationPastDeadline()) return { error: `CEL ${JSON.stringify(cel.source)}: ${PAST_DEADLINE_REASON}` };
  const meter = new CostMeter(budget);
  let result: unknown;
  try {
    result = cel.run(bindings, meter);
  } catch (e) {
    return { error: `CEL ${JSON.stringify(cel.source)}: ${(e as Error).message}` };
  }
  if (meter.exceeded !== undefined) return { error: `CEL ${JSON.stringify(cel.source)}: ${meter.exceeded}` };
  if (celLibrary().isCelError(result)) return { error: `CEL ${JSON.stringify(cel.source)}: ${result.message}` };
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
