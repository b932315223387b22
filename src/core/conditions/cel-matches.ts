// CEL's `matches()` on the project's one regular-expression engine (linear-regex.ts): RE2 syntax, unanchored as
// cel-go's (Go's regexp.MatchString), linear in the input. A pattern written in the expression as a string
// literal is compiled once, when the expression loads, so one RE2 refuses is a load error with the reason, as
// kube-apiserver refuses it when a policy is created; a pattern computed at run time is compiled when it is met
// (a few recent ones kept), and one RE2 refuses is an evaluation error.
import type { CelFunc } from "@bufbuild/cel";
import { celLibrary } from "./cel-library.ts";
import { compileLinearRegex, type LinearRegex } from "../primitives/linear-regex.ts";
import { ConditionError } from "./condition-error.ts";

/** What @bufbuild/cel's `celEnv({ re2 })` takes. */
export interface CelRegexEngine {
  compile(pattern: string): { test(text: string): boolean };
}

const RUNTIME_PATTERNS_KEPT = 16;

/** The engine for one expression; throws, naming the literal pattern, when RE2 refuses one of its literals. */
export function celRegexEngine(expr: unknown, source: string): CelRegexEngine {
  const compiled = new Map<string, LinearRegex>();
  for (const pattern of literalPatterns(expr)) {
    const result = compileLinearRegex(pattern, "anywhere");
    if ("error" in result) throw new ConditionError("invalid-regex", `CEL ${JSON.stringify(source)}: matches(${JSON.stringify(pattern)}): ${result.error}`);
    compiled.set(pattern, result.regex);
  }
  const literals = compiled.size;
  return {
    compile(pattern) {
      const known = compiled.get(pattern);
      if (known) return known;
      const result = compileLinearRegex(pattern, "anywhere");
      if ("error" in result) throw new ConditionError("invalid-regex", `matches(${JSON.stringify(pattern)}): ${result.error}`);
      if (compiled.size >= literals + RUNTIME_PATTERNS_KEPT) compiled.delete([...compiled.keys()][literals]!);
      compiled.set(pattern, result.regex);
      return result.regex;
    },
  };
}

/**
 * `matches(text, pattern)`, the global form of `text.matches(pattern)` that cel-go (and so kube-apiserver) also
 * accepts; @bufbuild/cel has only the method, so a policy written the other way would fail at every evaluation.
 */
export function globalMatches(engine: CelRegexEngine): CelFunc {
  const { celFunc, CelScalar } = celLibrary();
  return celFunc("matches", [CelScalar.STRING, CelScalar.STRING], CelScalar.BOOL, (text, pattern) => engine.compile(pattern).test(text));
}

type Node = { $typeName?: string; function?: string; target?: unknown; args?: unknown[]; exprKind?: { case?: string; value?: unknown } };

/** The string literals given as the pattern of `s.matches(p)` or `matches(s, p)` anywhere in the parsed expression. */
function literalPatterns(expr: unknown): string[] {
  const found: string[] = [];
  const visit = (node: unknown): void => {
    if (typeof node !== "object" || node === null) return;
    if (Array.isArray(node)) return node.forEach(visit);
    const n = node as Node;
    if (n.$typeName === "cel.expr.Expr.Call" && n.function === "matches") {
      const pattern = n.target === undefined ? n.args?.[1] : n.args?.[0];
      const literal = stringLiteral(pattern);
      if (literal !== undefined) found.push(literal);
    }
    Object.values(node).forEach(visit);
  };
  visit(expr);
  return found;
}

function stringLiteral(expr: unknown): string | undefined {
  const kind = (expr as Node | undefined)?.exprKind;
  if (kind?.case !== "constExpr") return undefined;
  const constant = kind.value as { constantKind?: { case?: string; value?: unknown } };
  return constant.constantKind?.case === "stringValue" ? (constant.constantKind.value as string) : undefined;
}
