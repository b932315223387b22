// How a CEL evaluation is counted on its CostMeter (cost-meter.ts) while it runs. Evaluation is synchronous, so
// the count has to happen inside it. @bufbuild/cel has no hook for that; it has two seams, both used here:
// - every function call goes through the environment's function resolver: a wrapping resolver counts each call
//   with the sizes of its operands (cel-call-cost.ts) before making it;
// - what is not a function call (reading a variable or a field, indexing, building a list or map, a macro's loop
//   condition) is counted by rewriting the syntax tree before it is planned: such a node is wrapped in a call to
//   an identity function named "@cost:<n>" (no CEL text can name it: "@" is not an identifier character), whose
//   resolver entry counts n and hands the value through.
// So each iteration of a loop counts its condition and its step, and a loop stops as soon as the count passes
// the limit: the counter throws, and nothing in the interpreter catches a throw short of the top of the plan.
import type { CelEnv } from "@bufbuild/cel";
import { celLibrary } from "./cel-library.ts";
import { COSTED_BY_RESULT, callCost, type Measure } from "./cel-call-cost.ts";
import { LIST_CREATE_BASE_COST, MAP_CREATE_BASE_COST, STRUCT_CREATE_BASE_COST } from "./cel-cost-limits.ts";
import type { CostMeter } from "./cost-meter.ts";
import type { Expr } from "./cel-cost-estimate.ts";

type FuncGroup = NonNullable<ReturnType<CelEnv["funcs"]["find"]>>;
/** What the planner uses of a function group: it calls it, and names it in errors. */
type Callable = Pick<FuncGroup, "name" | "call">;

/**
 * The environment an expression is planned with: `base`'s functions, each call counted on the meter `current()`
 * returns (the evaluation under way), and the "@cost:<n>" counters metered() puts in the tree.
 */
export function meteredEnv(base: CelEnv, current: () => CostMeter): CelEnv {
  // Functions are called only while an evaluation runs, with its meter.
  const charge = (units: number) => current().charge(units);
  const funcs = {
    find(name: string): Callable | undefined {
      if (name.startsWith(COUNTER)) return passThrough(name, Number(name.slice(COUNTER.length)), charge);
      const group = base.funcs.find(name);
      return group && countedCalls(group, charge);
    },
  };
  // plan() reads only namespace, registry and funcs.find of the environment it is given.
  return { namespace: base.namespace, registry: base.registry, variables: base.variables, funcs } as unknown as CelEnv;
}

function passThrough(name: string, units: number, charge: (units: number) => void): Callable {
  return {
    name,
    call(_id, _target, args) {
      charge(units);
      return args[0];
    },
  };
}

function countedCalls(group: FuncGroup, charge: (units: number) => void): Callable {
  const byResult = COSTED_BY_RESULT.has(group.name);
  return {
    name: group.name,
    call(id, target, args) {
      const operands = [target === undefined ? undefined : measure(target), args.map(measure)] as const;
      if (!byResult) charge(callCost(group.name, ...operands));
      const result = group.call(id, target, args);
      if (byResult) charge(callCost(group.name, ...operands, measure(result)));
      return result;
    },
  };
}

function measure(v: unknown): Measure {
  if (typeof v === "string") return { text: v.length };
  if (v instanceof Uint8Array) return { text: v.length };
  const { isCelList, isCelMap } = celLibrary();
  if (isCelList(v)) return { items: v.size };
  if (isCelMap(v)) return { entries: v.size };
  return {};
}

const COUNTER = "@cost:";

/** Indexing, which the planner makes part of a chain of field reads rather than a function call. */
const INDEX = "_[_]";

/**
 * The tree with counters around what is not a function call, as cel-go's run-time tracker counts it: 1 for a
 * variable and for each field read or index after it (`c.securityContext.privileged` costs 3), 1 for a macro's
 * loop condition, 10 for building a list, 30 a map, 40 a message. has() counts only its operand, as in
 * kube-apiserver. `variables` are the expression's variables (names of functions' namespaces are not).
 */
export function metered(expr: Expr, variables: readonly string[]): Expr {
  // The parser numbers nodes from 1; ids serve only to place errors, and a counter has none of its own.
  let nextId = -1n;
  const count = (e: Expr, units: number): Expr =>
    units <= 0
      ? e
      : {
          $typeName: "cel.expr.Expr",
          id: nextId--,
          exprKind: { case: "callExpr", value: { $typeName: "cel.expr.Expr.Call", function: `${COUNTER}${units}`, args: [e] } },
        };

  const rewrite = (e: Expr, names: ReadonlySet<string>): Expr => {
    const kind = e.exprKind;
    switch (kind.case) {
      case "identExpr":
      case "selectExpr":
        return chain(e, names);
      case "callExpr": {
        const call = kind.value;
        if (call.function === INDEX) return chain(e, names);
        const args = call.args.map((a) => rewrite(a, names));
        const target = call.target && rewrite(call.target, names);
        const rebuilt: Expr = { ...e, exprKind: { case: "callExpr", value: { ...call, args, ...(target ? { target } : {}) } } };
        // Every other call is counted by the resolver, but this one the planner evaluates itself; && || ?: cost nothing.
        return call.function === "@not_strictly_false" ? count(rebuilt, 1) : rebuilt;
      }
      case "listExpr":
        return count(
          { ...e, exprKind: { case: "listExpr", value: { ...kind.value, elements: kind.value.elements.map((x) => rewrite(x, names)) } } },
          LIST_CREATE_BASE_COST,
        );
      case "structExpr": {
        const entries = kind.value.entries.map((entry) => ({
          ...entry,
          keyKind: entry.keyKind.case === "mapKey" ? { case: "mapKey" as const, value: rewrite(entry.keyKind.value, names) } : entry.keyKind,
          value: rewrite(entry.value!, names),
        }));
        const cost = kind.value.messageName === "" ? MAP_CREATE_BASE_COST : STRUCT_CREATE_BASE_COST;
        return count({ ...e, exprKind: { case: "structExpr", value: { ...kind.value, entries } } }, cost);
      }
      case "comprehensionExpr": {
        const c = kind.value;
        const inLoop = new Set([...names, c.iterVar, c.accuVar]);
        const inResult = new Set([...names, c.accuVar]);
        const value = {
          ...c,
          // The parser fills all five.
          iterRange: rewrite(c.iterRange!, names),
          accuInit: rewrite(c.accuInit!, names),
          loopCondition: rewrite(c.loopCondition!, inLoop),
          loopStep: rewrite(c.loopStep!, inLoop),
          result: rewrite(c.result!, inResult),
        };
        return { ...e, exprKind: { case: "comprehensionExpr", value } };
      }
      default:
        return e;
    }
  };

  /** A chain of field reads and indexes, counted once at its top, whose base is a variable or another expression. */
  const chain = (top: Expr, names: ReadonlySet<string>): Expr => {
    let units = 0;
    const rebuild = (e: Expr): Expr => {
      const kind = e.exprKind;
      if (kind.case === "selectExpr") {
        // has() costs nothing of its own.
        if (!kind.value.testOnly) units += 1;
        return { ...e, exprKind: { case: "selectExpr", value: { ...kind.value, operand: rebuild(kind.value.operand!) } } };
      }
      if (kind.case === "callExpr" && kind.value.function === INDEX) {
        units += 1;
        const [operand, index] = kind.value.args as [Expr, Expr];
        return { ...e, exprKind: { case: "callExpr", value: { ...kind.value, args: [rebuild(operand), rewrite(index, names)] } } };
      }
      if (kind.case === "identExpr") {
        if (names.has(kind.value.name)) units += 1;
        return e;
      }
      return rewrite(e, names);
    };
    const rebuilt = rebuild(top);
    return count(rebuilt, units);
  };

  return rewrite(expr, new Set(variables));
}
