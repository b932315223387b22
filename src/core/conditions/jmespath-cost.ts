// JMESPath evaluated on a CostMeter. The library (like go-jmespath, which Kyverno uses) evaluates whatever it is
// given for as long as it takes, and an expression is tenant text: `[@, @][]` doubles the data at every step, a
// filter that tests `$` lists the whole document's keys once per item, `==` walks both sides. No package bounds
// JMESPath, so the library's interpreter is extended here: every node visited costs a unit, and each step that
// does work in proportion to a value costs that value's size (json-weight.ts):
// - a value a node builds (a projection, a flatten, a slice, a multi-select, a function's result) its items,
//   entries or characters; a slice also what it slices;
// - a value a function is handed, the same (the functions walk their arguments' items: `contains`, `sort`,
//   `max`, their type checks); `sort` n·log2 n more; `to_string` and `join` the deep weight of what they write;
// - the functions that take expression references (map, sort_by, …) run them here, so they are counted too;
// - a value tested for truth (a filter's condition, `||`, `&&`, `!`, `?:`), its entries when it is an object
//   (the library lists an object's keys to know whether it is empty);
// - `==` and `!=` the deep weight of both sides, unless they are one value.
// The meter ends the evaluation past its limit or the review's deadline (cost-meter.ts).
import { TreeInterpreter } from "@jmespath-community/jmespath";
import type { CostMeter } from "./cost-meter.ts";
import { DeepWeights, ShallowSizes } from "./json-weight.ts";

type LibraryInterpreter = typeof TreeInterpreter;
type Ast = Parameters<LibraryInterpreter["visit"]>[0];
type Visited = ReturnType<LibraryInterpreter["visit"]>;
type Input = Parameters<LibraryInterpreter["visit"]>[1];

/** The fields of the library's syntax nodes read here (its node types are not exported). */
interface SyntaxNode {
  type: string;
  name?: string;
  value?: unknown;
  left?: SyntaxNode;
  right?: SyntaxNode;
  child?: SyntaxNode;
  condition?: SyntaxNode;
  children?: SyntaxNode[];
}

/** The library's interpreter state that a scoped copy (a `let` expression) carries over, as its withScope does. */
interface InterpreterState {
  _rootValue: unknown;
  _scope: { withScope(scope: unknown): unknown };
  runtime: { _functionTable: Record<string, unknown>; getCustomFunctions(): string[] };
}

const state = (i: object) => i as unknown as InterpreterState;

/** The class of the library's interpreter: it exports only an instance. */
const Interpreter = TreeInterpreter.constructor as new () => LibraryInterpreter;

/** Nodes that build a new value from what they visit (Flatten, Slice, filters and functions are counted by their cases). */
const BUILDS = new Set(["Projection", "ValueProjection", "MultiSelectList", "MultiSelectHash"]);
/** A node of this file's own: its child's value, tested for truth by its parent. */
const TESTED = "@tested";

/** What one evaluation counts on: its meter, and the sizes and weights it has learnt. */
class Counting {
  readonly meter: CostMeter;
  readonly shallow = new ShallowSizes();
  readonly deep: DeepWeights;

  constructor(meter: CostMeter) {
    this.meter = meter;
    this.deep = new DeepWeights(meter);
  }
}

class MeteredInterpreter extends Interpreter {
  counting: Counting | undefined;

  constructor() {
    super();
    // The built-in functions that take expression references (map, sort_by, group_by, …) run them on the
    // interpreter that made them: this one's own, so that they are counted. The functions registered by name
    // (the bounded trims, replace and pads, time_since: functions of their arguments alone) are in the shared
    // instance's table, and are taken from there.
    const shared = state(TreeInterpreter).runtime;
    const table = state(this).runtime._functionTable;
    for (const name of shared.getCustomFunctions()) table[name] = shared._functionTable[name];
  }

  get #meter(): CostMeter {
    return this.counting!.meter;
  }
  get #shallow(): ShallowSizes {
    return this.counting!.shallow;
  }
  get #deep(): DeepWeights {
    return this.counting!.deep;
  }

  override withScope(scope: Parameters<LibraryInterpreter["withScope"]>[0]): LibraryInterpreter {
    const scoped = new MeteredInterpreter();
    scoped.counting = this.counting;
    state(scoped)._rootValue = state(this)._rootValue;
    state(scoped)._scope = state(this)._scope.withScope(scope) as InterpreterState["_scope"];
    return scoped;
  }

  override visit(ast: Ast, value: Input): Visited {
    this.#meter.charge(1);
    const node = ast as unknown as SyntaxNode;
    switch (node.type) {
      case HANDED_OVER:
        return node.value as Visited;
      case TESTED: {
        const tested = this.visit(node.child as unknown as Ast, value);
        if (typeof tested === "object" && tested !== null && !Array.isArray(tested)) this.#meter.charge(this.#shallow.of(tested));
        return tested;
      }
      case "Comparator": {
        const left = this.visit(node.left as unknown as Ast, value);
        const right = this.visit(node.right as unknown as Ast, value);
        // Strings compare character by character even when equal; arrays and objects unless they are one value.
        const walked = typeof left === "string" || (typeof left === "object" && left !== null && right !== null && left !== right);
        if ((node.name === "EQ" || node.name === "NE") && typeof left === typeof right && walked)
          this.#meter.charge(this.#deep.of(left) + this.#deep.of(right));
        return super.visit({ ...node, left: handOver(left), right: handOver(right) } as unknown as Ast, value);
      }
      case "Function": {
        const args = (node.children ?? []).map((c) => this.visit(c as unknown as Ast, value));
        for (const a of args) this.#meter.charge(this.#shallow.of(a));
        // These write out what they are handed, not references to it: a list of one long string repeated, joined.
        if (node.name === "to_string" && typeof args[0] === "object") this.#meter.charge(this.#deep.of(args[0]));
        if (node.name === "join") this.#meter.charge(this.#deep.of(args[1]));
        if (node.name === "sort" && Array.isArray(args[0])) this.#meter.charge(args[0].length * Math.ceil(Math.log2(args[0].length + 1)));
        return this.#built(super.visit({ ...node, children: args.map(handOver) } as unknown as Ast, value));
      }
      case "Slice":
        this.#meter.charge(this.#shallow.of(value));
        return this.#built(super.visit(ast, value));
      case "Flatten": {
        // Flattening walks every item, arrays that add nothing (empty ones) too.
        const base = this.visit(node.child as unknown as Ast, value);
        this.#meter.charge(this.#shallow.of(base));
        return this.#built(super.visit({ ...node, child: handOver(base) } as unknown as Ast, value));
      }
      case "FilterProjection":
        return this.#built(super.visit(withTestedOperand(node) as unknown as Ast, value));
      case "OrExpression":
      case "AndExpression":
      case "NotExpression":
      case "Ternary":
        return super.visit(withTestedOperand(node) as unknown as Ast, value);
      default: {
        const result = super.visit(ast, value);
        return BUILDS.has(node.type) ? this.#built(result) : result;
      }
    }
  }

  #built(result: Visited): Visited {
    this.#meter.charge(this.#shallow.of(result));
    return result;
  }
}

/** A node of this file's own: a value already computed, handed to the library's code for a node. */
const HANDED_OVER = "@handed-over";

function handOver(value: unknown): SyntaxNode {
  return { type: HANDED_OVER, value };
}

const rewritten = new WeakMap<SyntaxNode, SyntaxNode>();

/** The node with the operand it tests for truth wrapped, so that the test is counted; rewritten once per node. */
function withTestedOperand(node: SyntaxNode): SyntaxNode {
  let copy = rewritten.get(node);
  if (copy) return copy;
  const field = node.type === "FilterProjection" || node.type === "Ternary" ? "condition" : node.type === "NotExpression" ? "child" : "left";
  copy = { ...node, [field]: { type: TESTED, child: node[field] } };
  rewritten.set(node, copy);
  return copy;
}

// One interpreter for every evaluation (building one builds its table of functions): evaluations are
// synchronous, and each is given its own Counting. Made at the first search, after compileOperand has
// registered the functions it copies.
let interpreter: MeteredInterpreter | undefined;

/** Searches `data` with the compiled expression, counting on `meter`: throws what the meter throws past its limit. */
export function meteredSearch(ast: Ast, data: unknown, meter: CostMeter): Visited {
  interpreter ??= new MeteredInterpreter();
  const outer = interpreter.counting;
  interpreter.counting = new Counting(meter);
  try {
    return interpreter.search(ast, data as Parameters<LibraryInterpreter["search"]>[1]);
  } finally {
    interpreter.counting = outer;
  }
}
