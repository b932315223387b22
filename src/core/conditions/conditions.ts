// Conditions of the image-verification design: a list of blocks, each with `all` (every condition holds) and
// `any` (at least one holds); every block must hold. Compiled at load time (expressions, operators), evaluated
// against data, and explained: "conditions[0].all[1]: 3 is not Equals 0". Pure: the time time_since measures to
// is an input (the engine's admission time).
import { compileOperand, evaluateOperand, type ExpressionEnvironment, type Operand } from "./jmespath-expression.ts";
import { formatDuration } from "../primitives/duration.ts";
import { ConditionError } from "./condition-error.ts";
import { compare, compareCost, isOperator, OPERATORS, type Operator } from "./operators.ts";
import { CostMeter } from "./cost-meter.ts";
import { DeepWeights } from "./json-weight.ts";

export interface RawCondition {
  key: unknown;
  operator: unknown;
  value?: unknown;
  message?: string;
}

export interface RawConditionBlock {
  all?: RawCondition[];
  any?: RawCondition[];
}

interface Condition {
  path: string;
  key: Operand;
  operator: Operator;
  value: Operand;
  message?: string;
}

export interface CompiledConditions {
  blocks: Array<{ all: Condition[]; any: Condition[] }>;
}

export type FieldPath = Array<string | number>;

export function compileConditions(
  raw: readonly RawConditionBlock[],
  at: FieldPath,
  label = "conditions",
): { conditions: CompiledConditions; errors: Array<{ path: FieldPath; message: string }> } {
  const errors: Array<{ path: FieldPath; message: string }> = [];
  const blocks = raw.map((block, i) => {
    const part = (kind: "all" | "any") =>
      (block[kind] ?? []).flatMap((c, j) => {
        const here = [...at, i, kind, j];
        if (!isOperator(c.operator)) {
          errors.push({ path: [...here, "operator"], message: `unknown operator ${JSON.stringify(c.operator)}; use one of ${OPERATORS.join(", ")}` });
          return [];
        }
        const operands: Operand[] = [];
        for (const field of ["key", "value"] as const) {
          try {
            const operand = compileOperand(c[field]);
            const ambiguity = "literal" in operand ? ambiguousMagnitude(operand.literal) : undefined;
            if (ambiguity) errors.push({ path: [...here, field], message: ambiguity });
            else operands.push(operand);
          } catch (e) {
            errors.push({ path: [...here, field], message: (e as Error).message });
          }
        }
        if (operands.length < 2) return [];
        return [
          { path: `${label}[${i}].${kind}[${j}]`, key: operands[0]!, operator: c.operator, value: operands[1]!, ...(c.message ? { message: c.message } : {}) },
        ];
      });
    return { all: part("all"), any: part("any") };
  });
  return { conditions: { blocks }, errors };
}

/**
 * "500m" is both a duration (500 minutes) and a quantity (half a unit), and a comparison would pick one by what the
 * other side happens to be: a literal written so is refused, with both unambiguous spellings.
 */
function ambiguousMagnitude(literal: unknown): string | undefined {
  if (typeof literal !== "string") return undefined;
  const m = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))m$/.exec(literal.trim());
  if (!m) return undefined;
  const minutes = Number(m[1]);
  return (
    `${JSON.stringify(literal)} is both ${minutes} minutes and the quantity ${minutes / 1000}: write ` +
    `${JSON.stringify(formatDuration(minutes * 60_000))} for the duration or ${JSON.stringify(String(minutes / 1000))} for the quantity`
  );
}

/** undefined when every block holds for `data`; otherwise the first failure, explained. `env.now`: the admission's time. */
export function evaluateConditions(conditions: CompiledConditions, data: unknown, env: ExpressionEnvironment = {}): string | undefined {
  for (const block of conditions.blocks) {
    for (const c of block.all) {
      const failure = check(c, data, env);
      if (failure) return failure;
    }
    if (block.any.length > 0) {
      const failures = block.any.map((c) => check(c, data, env));
      if (failures.every((f) => f !== undefined)) return `none of ${failures.join("; ")}`;
    }
  }
  return undefined;
}

/** One condition is one evaluation on the meter: its two expressions and the comparison of what they found. */
function check(c: Condition, data: unknown, env: ExpressionEnvironment): string | undefined {
  const meter = new CostMeter(env.budget);
  let found: unknown;
  let expected: unknown;
  try {
    found = evaluateOperand(c.key, data, env, meter);
    expected = evaluateOperand(c.value, data, env, meter);
    meter.charge(compareCost(found, c.operator, expected, new DeepWeights(meter)));
  } catch (e) {
    return `${c.path}: ${meter.exceeded !== undefined && !(e instanceof ConditionError) ? `comparing what its expressions found: ${meter.exceeded}` : (e as Error).message}`;
  } finally {
    meter.settle();
  }
  const failure = compare(found, c.operator, expected);
  if (!failure) return undefined;
  return `${c.path}: ${c.message ?? failure}`;
}
