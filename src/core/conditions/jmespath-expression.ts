// JMESPath in conditions, as the image-verification design writes it: a value "{{ expr }}" is an expression
// evaluated against the data (the attestation's predicate), any other value is a literal. Expressions are
// compiled once at load time, so a syntax error is a load error. The design's examples also need
// time_since(layout, from, to), registered here; its "now" is the evaluation's time, given by the caller.
//
// An evaluation is counted on a CostMeter and ends past its limit, its budget or the review's deadline
// (jmespath-cost.ts): a tenant's expression cannot stall the server others share.
import { compile, isRegistered, registerFunction, TYPE_NULL, TYPE_NUMBER, TYPE_STRING } from "@jmespath-community/jmespath";
import { formatDuration } from "../primitives/duration.ts";
import { ConditionError } from "./condition-error.ts";
import { CostMeter, type CostBudget } from "./cost-meter.ts";
import { evaluationPastDeadline, PAST_DEADLINE_REASON } from "./evaluation-deadline.ts";
import { meteredSearch } from "./jmespath-cost.ts";
import { padLeft, padRight, replace } from "./jmespath-bounded-strings.ts";
import { trim, trimLeft, trimRight } from "./jmespath-trim.ts";

type Ast = ReturnType<typeof compile>;

/** A compiled value: an expression, or a literal. */
export type Operand = { expression: string; ast: Ast } | { literal: unknown };

const TEMPLATE = /^\s*\{\{(.*)\}\}\s*$/s;

/** Throws with the parser's reason when the expression does not compile. */
export function compileOperand(value: unknown): Operand {
  if (typeof value !== "string") return { literal: value };
  const m = TEMPLATE.exec(value);
  if (!m) return { literal: value };
  const expression = m[1]!.trim();
  registerFunctions();
  try {
    return { expression, ast: compile(expression) };
  } catch (e) {
    throw new ConditionError("invalid-jmespath", `invalid JMESPath ${JSON.stringify(expression)}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * What an evaluation knows besides the data: the admission's time (ms since the epoch), which time_since
 * measures to, and the budget it shares with the policy's other expressions.
 */
export interface ExpressionEnvironment {
  now?: number;
  budget?: CostBudget;
}

/**
 * The operand's value. An expression that fails at run time (a function on the wrong type) throws with the
 * reason; so does one that passes its cost limit or the review's deadline. It is counted on `meter` when given
 * (the caller counts more work on it and settles it), else on its own meter, settled here into `env.budget`.
 */
export function evaluateOperand(operand: Operand, data: unknown, env: ExpressionEnvironment = {}, meter?: CostMeter): unknown {
  if ("literal" in operand) return operand.literal;
  const counted = meter ?? new CostMeter(env.budget);
  // Past the review's deadline nothing more is evaluated, however cheap.
  if (evaluationPastDeadline()) throw endedBy(operand, PAST_DEADLINE_REASON);
  // The library's functions are registered globally and see only their arguments: the time is handed over
  // for this one synchronous search and taken back after it, so no evaluation sees another's.
  const outer = evaluationNow;
  evaluationNow = env.now;
  try {
    const value = meteredSearch(operand.ast, data, counted);
    return value === null ? undefined : value;
  } catch (e) {
    if (counted.exceeded !== undefined) throw endedBy(operand, counted.exceeded, e);
    throw e;
  } finally {
    evaluationNow = outer;
    if (!meter) counted.settle();
  }
}

function endedBy(operand: { expression: string }, reason: string, cause?: unknown): ConditionError {
  const code = reason === PAST_DEADLINE_REASON ? "past-deadline" : "cost-limit-exceeded";
  return new ConditionError(code, `JMESPath ${JSON.stringify(operand.expression)}: ${reason}`, cause === undefined ? undefined : { cause });
}

let evaluationNow: number | undefined;
let evaluationTimeReads = 0;

/**
 * How many times an evaluation has read the evaluation's time so far (time_since to now): a judgement that read it
 * holds only for that moment (src/core/image-policy/verified-judgements.ts).
 */
export function timeReads(): number {
  return evaluationTimeReads;
}
let registered = false;
const TRIM_SIGNATURE = [{ types: [TYPE_STRING] }, { types: [TYPE_STRING], optional: true }];
const REPLACE_SIGNATURE = [{ types: [TYPE_STRING] }, { types: [TYPE_STRING] }, { types: [TYPE_STRING] }, { types: [TYPE_NUMBER], optional: true }];
const PAD_SIGNATURE = [{ types: [TYPE_STRING] }, { types: [TYPE_NUMBER] }, { types: [TYPE_STRING], optional: true }];

/**
 * time_since(layout, from, to): the duration from `from` to `to` (the evaluation's time when empty), Go-formatted ("27h3m4s").
 * Timestamps are RFC 3339 (the layout argument is accepted for compatibility; only RFC 3339 is read).
 */
function registerFunctions(): void {
  if (registered) return;
  registered = true;
  // The library's trims backtrack quadratically on the strings they trim (jmespath-trim.ts).
  for (const [name, trimmer] of [
    ["trim", trim],
    ["trim_left", trimLeft],
    ["trim_right", trimRight],
  ] as const)
    registerFunction(name, ([subject, chars]) => trimmer(subject as string, chars as string | undefined), TRIM_SIGNATURE, { override: true });
  // The library's replace and pads do what any count or width says (jmespath-bounded-strings.ts).
  registerFunction(
    "replace",
    ([subject, old, by, count]) => replace(subject as string, old as string, by as string, count as number | undefined),
    REPLACE_SIGNATURE,
    {
      override: true,
    },
  );
  registerFunction("pad_left", ([subject, width, pad]) => padLeft(subject as string, width as number, pad as string | undefined), PAD_SIGNATURE, {
    override: true,
  });
  registerFunction("pad_right", ([subject, width, pad]) => padRight(subject as string, width as number, pad as string | undefined), PAD_SIGNATURE, {
    override: true,
  });
  if (isRegistered("time_since")) return;
  registerFunction(
    "time_since",
    ([, from, to]) => {
      // A missing field arrives as null: say "not found" rather than the interpreter's type error.
      if (from === null) throw new ConditionError("value-not-found", "time_since: the start time is not found");
      const start = Date.parse(String(from));
      const untilNow = to === "" || to === null || to === undefined;
      if (untilNow) evaluationTimeReads++;
      if (untilNow && evaluationNow === undefined)
        throw new ConditionError("no-evaluation-time", "time_since: the current time was not given to the evaluation");
      const end = untilNow ? evaluationNow! : Date.parse(String(to));
      if (Number.isNaN(start) || Number.isNaN(end))
        throw new ConditionError("invalid-time", `time_since: ${JSON.stringify(Number.isNaN(start) ? from : to)} is not an RFC 3339 time`);
      return formatDuration(end - start);
    },
    [{ types: [TYPE_STRING] }, { types: [TYPE_STRING, TYPE_NULL] }, { types: [TYPE_STRING, TYPE_NULL] }],
  );
}
