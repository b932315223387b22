// The price of each CEL function call, shared by the estimate and the count (cel-call-cost.ts): cel-go's and
// kube-apiserver's prices, function by function.
import assert from "node:assert/strict";
import { test } from "node:test";
import { callCost, COSTED_BY_RESULT, sizeOf } from "../../../src/core/conditions/cel-call-cost.ts";

const text = (n: number) => ({ text: n });

test("sizes: a string's, list's or map's length; 1 for a scalar", () => {
  assert.equal(sizeOf({}), 1);
  assert.equal(sizeOf(text(0)), 1);
  assert.equal(sizeOf(text(30)), 30);
  assert.equal(sizeOf({ items: 7 }), 7);
  assert.equal(sizeOf({ entries: 9 }), 9);
  // What may be any of them is as large as its largest.
  assert.equal(sizeOf({ text: 5, items: 8, entries: 6 }), 8);
});

test("comparisons cost a tenth of the shorter operand, at least 1", () => {
  for (const op of ["_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"]) {
    assert.equal(callCost(op, undefined, [text(1000), text(95)]), 10, op);
    assert.equal(callCost(op, undefined, [text(95), text(1000)]), 10, op);
    assert.equal(callCost(op, undefined, [{}, {}]), 1, op);
  }
  assert.equal(callCost("_==_", undefined, [{ items: 300 }, { items: 200 }]), 20);
});

test("+ copies strings (a tenth of both) and joins lists for 1; `in` searches a list and looks a map up", () => {
  assert.equal(callCost("_+_", undefined, [text(100), text(51)]), 16);
  assert.equal(callCost("_+_", undefined, [{ items: 1000 }, { items: 1000 }]), 1);
  assert.equal(callCost("_+_", undefined, [text(100), {}]), 1);
  assert.equal(callCost("_+_", undefined, [{}, text(100)]), 1);
  assert.equal(callCost("@in", undefined, [text(3), { items: 500 }]), 500);
  assert.equal(callCost("@in", undefined, [text(3), { entries: 500 }]), 1);
});

test("matches: the text's tenth (plus one) times a quarter of the pattern; receiver or first argument", () => {
  assert.equal(callCost("matches", text(99), [text(20)]), 10 * 5);
  assert.equal(callCost("matches", undefined, [text(99), text(20)]), 10 * 5);
  assert.equal(callCost("matches", text(0), [text(1)]), 1);
});

test("contains, indexOf and lastIndexOf: a tenth of the string times a tenth of the substring", () => {
  for (const fn of ["contains", "indexOf", "lastIndexOf"]) assert.equal(callCost(fn, text(1000), [text(30)]), 100 * 3, fn);
});

test("startsWith and endsWith: a tenth of the prefix or suffix, whatever the string", () => {
  for (const fn of ["startsWith", "endsWith"]) {
    assert.equal(callCost(fn, text(1_000_000), [text(40)]), 4, fn);
    assert.equal(callCost(fn, text(1_000_000), [text(0)]), 1, fn);
  }
});

test("the strings extension and conversions traverse their string once; replace and split twice; join its result twice", () => {
  for (const fn of ["lowerAscii", "upperAscii", "trim", "substring", "charAt", "format", "string", "bytes"])
    assert.equal(callCost(fn, text(1000), []), 100, fn);
  assert.equal(callCost("strings.quote", undefined, [text(1000)]), 100);
  for (const fn of ["replace", "split"]) assert.equal(callCost(fn, text(1000), [text(1)]), 200, fn);
  assert.equal(callCost("join", { items: 10 }, [text(1)], text(1000)), 200);
  assert.equal(callCost("join", { items: 10 }, [text(1)]), 1, "before the call, its result is not known");
  assert.deepEqual([...COSTED_BY_RESULT], ["join"]);
  // A conversion of a number: 1.
  assert.equal(callCost("string", undefined, [{}]), 1);
});

test("every other call costs 1", () => {
  for (const fn of ["size", "int", "_*_", "!_", "timestamp", "getHours", "unknownFunction"])
    assert.equal(callCost(fn, text(1_000_000), [text(1_000_000)]), 1, fn);
});
