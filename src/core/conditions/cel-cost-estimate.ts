// The worst-case cost of a CEL expression, estimated from its syntax tree when the policy loads, as cel-go's
// checker/cost.go estimates it for kube-apiserver: each identifier costs 1, each call what cel-call-cost.ts
// says, a literal list 10 and a map 30, and a comprehension (all, exists, exists_one, map, filter) its range
// plus the cost of one iteration times the largest number of items the range can have. @bufbuild/cel has no
// cost estimation and no JavaScript CEL package implements cel-go's, so it is written here.
//
// Values reached from a variable have no schema: each is taken to be as large as a request kube-apiserver
// accepts allows (cel-cost-limits.ts), as a string, a list or a map. Selecting a field of such a value is free,
// as cel-go prices a select on a `dyn` operand, and so is has() (kube-apiserver turns its cost off). So a loop
// over a list of the request costs about a million times its body, and a loop inside it a million times more:
// nested loops over lists the policy cannot bound are refused, as kube-apiserver refuses them.
import type { parse } from "@bufbuild/cel";
import { callCost, type Measure } from "./cel-call-cost.ts";
import { LIST_CREATE_BASE_COST, MAP_CREATE_BASE_COST, MAX_LIST_ITEMS, MAX_MAP_ENTRIES, MAX_STRING_LENGTH, STRUCT_CREATE_BASE_COST } from "./cel-cost-limits.ts";

export type Expr = ReturnType<typeof parse>["expr"];

/** What the estimate knows of a value: the largest it can be as a string, as a list (and its items), as a map. */
interface Shape {
  text?: number;
  items?: { count: number; item: Shape };
  entries?: { count: number; key: Shape; value: Shape };
}

/** A value from the request: anything, up to the request's size; its items and fields are the same. */
const INPUT: Shape = { text: MAX_STRING_LENGTH };
INPUT.items = { count: MAX_LIST_ITEMS, item: INPUT };
INPUT.entries = { count: MAX_MAP_ENTRIES, key: { text: MAX_STRING_LENGTH }, value: INPUT };

/** A bool, number, null, type or error: size 1. */
const SCALAR: Shape = {};

/** The text a conversion to string gives a number, a bool or a timestamp at most. */
const SCALAR_TEXT = 32;

interface Estimate {
  cost: number;
  shape: Shape;
}

/** The estimated worst-case cost of an expression whose `variables` hold request data. */
export function estimateCost(expr: Expr, variables: readonly string[]): number {
  return new Estimator(variables).estimate(expr).cost;
}

class Estimator {
  readonly #variables: ReadonlySet<string>;
  /** Comprehension variables in scope, innermost last. */
  readonly #locals: Array<{ name: string; shape: Shape }> = [];

  constructor(variables: readonly string[]) {
    this.#variables = new Set(variables);
  }

  // The parser fills every part of a node (a select's operand, a comprehension's five): hence the `!`s below.
  estimate(e: Expr): Estimate {
    const kind = e.exprKind;
    switch (kind.case) {
      case "constExpr":
        return { cost: 0, shape: constantShape(kind.value.constantKind) };
      case "identExpr":
        return { cost: 1, shape: this.#identShape(kind.value.name) };
      case "selectExpr": {
        const operand = this.estimate(kind.value.operand!);
        // has() and a select on a value of the request are free; a field of a map the expression built costs 1.
        if (kind.value.testOnly) return { cost: operand.cost, shape: SCALAR };
        const builtMap = operand.shape.entries !== undefined && operand.shape !== INPUT;
        return { cost: operand.cost + (builtMap ? 1 : 0), shape: operand.shape.entries?.value ?? SCALAR };
      }
      case "callExpr":
        return this.#call(kind.value.function, kind.value.target, kind.value.args);
      case "listExpr": {
        const elements = kind.value.elements.map((x) => this.estimate(x));
        return {
          cost: LIST_CREATE_BASE_COST + sum(elements.map((x) => x.cost)),
          shape: { items: { count: elements.length, item: unionAll(elements.map((x) => x.shape)) } },
        };
      }
      case "structExpr": {
        const entries = kind.value.entries.map((entry) => ({
          key: entry.keyKind.case === "mapKey" ? this.estimate(entry.keyKind.value) : { cost: 0, shape: SCALAR },
          value: this.estimate(entry.value!),
        }));
        const cost = sum(entries.map((x) => x.key.cost + x.value.cost));
        if (kind.value.messageName !== "") return { cost: cost + STRUCT_CREATE_BASE_COST, shape: SCALAR };
        return {
          cost: cost + MAP_CREATE_BASE_COST,
          shape: {
            entries: {
              count: entries.length,
              key: unionAll(entries.map((x) => x.key.shape)),
              value: unionAll(entries.map((x) => x.value.shape)),
            },
          },
        };
      }
      case "comprehensionExpr":
        return this.#comprehension(kind.value);
      default:
        return { cost: 0, shape: SCALAR };
    }
  }

  #isVariable(name: string): boolean {
    return this.#variables.has(name) || this.#locals.some((l) => l.name === name);
  }

  #identShape(name: string): Shape {
    for (let i = this.#locals.length - 1; i >= 0; i--) if (this.#locals[i]!.name === name) return this.#locals[i]!.shape;
    // A variable holds request data; any other name fails at run time, at no more cost.
    return this.#variables.has(name) ? INPUT : SCALAR;
  }

  #comprehension(c: Extract<Expr["exprKind"], { case: "comprehensionExpr" }>["value"]): Estimate {
    const range = this.estimate(c.iterRange!);
    const init = this.estimate(c.accuInit!);
    const iterations = Math.max(range.shape.items?.count ?? 0, range.shape.entries?.count ?? 0);
    // A list's items, or a map's keys.
    const item = union(range.shape.items?.item, range.shape.entries?.key);
    const [condition, step] = this.#with(
      [
        { name: c.accuVar, shape: init.shape },
        { name: c.iterVar, shape: item },
      ],
      () => [this.estimate(c.loopCondition!), this.estimate(c.loopStep!)],
    );
    // The result reads the accumulator: a bool or a count (its cost, 1, is all that matters), or the list built.
    const result = this.estimate(c.result!);
    const cost = range.cost + init.cost + iterations * (condition.cost + step.cost) + result.cost;
    // map() and filter() build a list of at most one item per iteration: what the step appends.
    const builtList = c.accuInit!.exprKind.case === "listExpr";
    return { cost, shape: builtList ? { items: { count: iterations, item: step.shape.items!.item } } : result.shape };
  }

  /** What `estimate` gives with comprehension variables in scope; out of scope again after. */
  #with<T>(locals: ReadonlyArray<{ name: string; shape: Shape }>, estimate: () => T): T {
    const depth = this.#locals.length;
    this.#locals.push(...locals);
    try {
      return estimate();
    } finally {
      this.#locals.length = depth;
    }
  }

  #call(name: string, targetExpr: Expr | undefined, argExprs: readonly Expr[]): Estimate {
    // `strings.quote(x)`: a function of a namespace, not a method of a value named `strings`.
    const namespace =
      targetExpr?.exprKind.case === "identExpr" && !this.#isVariable(targetExpr.exprKind.value.name) ? targetExpr.exprKind.value.name : undefined;
    const fn = namespace === undefined ? name : `${namespace}.${name}`;
    const target = targetExpr && namespace === undefined ? this.estimate(targetExpr) : undefined;
    const args = argExprs.map((x) => this.estimate(x));
    const operands = (target ? [target.cost] : []).concat(args.map((x) => x.cost));
    // The parser gives ?: three arguments, an index two, dyn() one.
    const [a, b, c] = args as [Estimate, Estimate, Estimate];
    switch (fn) {
      case "_&&_":
      case "_||_":
        return { cost: sum(operands), shape: SCALAR };
      case "_?_:_":
        return { cost: a.cost + Math.max(b.cost, c.cost), shape: union(b.shape, c.shape) };
      case "_[_]":
        return { cost: 1 + sum(operands), shape: union(a.shape.items?.item, a.shape.entries?.value) };
      case "dyn":
        return { cost: 1 + sum(operands), shape: a.shape };
    }
    const receiver = target?.shape;
    const result = resultShape(
      fn,
      receiver,
      args.map((x) => x.shape),
    );
    const cost = callCost(
      fn,
      receiver && measure(receiver),
      args.map((x) => measure(x.shape)),
      measure(result),
    );
    return { cost: cost + sum(operands), shape: result };
  }
}

/** The largest value a call can return, for the calls whose result has a size. */
function resultShape(fn: string, target: Shape | undefined, args: readonly Shape[]): Shape {
  const [a = SCALAR, b = SCALAR] = target ? [target, ...args] : args;
  switch (fn) {
    case "_+_": {
      const items = a.items && b.items ? { count: a.items.count + b.items.count, item: union(a.items.item, b.items.item) } : undefined;
      const text = a.text !== undefined && b.text !== undefined ? a.text + b.text : undefined;
      return { text, items };
    }
    case "lowerAscii":
    case "upperAscii":
    case "trim":
    case "substring":
      return { text: a.text ?? SCALAR_TEXT };
    case "replace":
      // Every character may become the replacement.
      return { text: (a.text ?? SCALAR_TEXT) * Math.max(1, args[1]!.text ?? 1) };
    case "split":
      return { items: { count: (a.text ?? SCALAR_TEXT) + 1, item: { text: a.text ?? SCALAR_TEXT } } };
    case "join":
      // The separators and one item: items are not summed, as kube-apiserver's estimate does not (the text of a
      // split() is no longer than the string split, not its length times its items).
      return { text: (a.items?.count ?? 0) * (b.text ?? 0) + (a.items?.item.text ?? SCALAR_TEXT) };
    case "strings.quote":
      return { text: 2 * (a.text ?? SCALAR_TEXT) + 2 };
    case "format":
      return { text: MAX_STRING_LENGTH };
    case "string":
    case "bytes":
      return { text: a.text ?? SCALAR_TEXT };
    default:
      return SCALAR;
  }
}

function constantShape(c: Extract<Expr["exprKind"], { case: "constExpr" }>["value"]["constantKind"]): Shape {
  switch (c.case) {
    case "stringValue":
      return { text: [...c.value].length };
    case "bytesValue":
      return { text: c.value.length };
    default:
      return SCALAR;
  }
}

function measure(s: Shape): Measure {
  return { text: s.text, items: s.items?.count, entries: s.entries?.count };
}

/** A shape that covers both: the larger bound of each kind. Request data covers all the rest. */
function union(x: Shape | undefined, y: Shape | undefined): Shape {
  if (!x || x === y) return y ?? SCALAR;
  if (!y) return x;
  if (x === INPUT || y === INPUT) return INPUT;
  const text = x.text === undefined ? y.text : y.text === undefined ? x.text : Math.max(x.text, y.text);
  const items = x.items && y.items ? { count: Math.max(x.items.count, y.items.count), item: union(x.items.item, y.items.item) } : (x.items ?? y.items);
  const entries =
    x.entries && y.entries
      ? { count: Math.max(x.entries.count, y.entries.count), key: union(x.entries.key, y.entries.key), value: union(x.entries.value, y.entries.value) }
      : (x.entries ?? y.entries);
  return { text, items, entries };
}

function unionAll(shapes: readonly Shape[]): Shape {
  return shapes.reduce<Shape | undefined>((acc, s) => union(acc, s), undefined) ?? SCALAR;
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}
