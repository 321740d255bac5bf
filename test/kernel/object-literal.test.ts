import { describe, expect, it } from "vitest";
import { objectLiteralFunction } from "../../shared/kernel/object-literal.js";

// Object-literal functions for run-time keys (shared/kernel/object-literal.ts): the names are data,
// whatever characters they hold, and the properties come in the order given.

describe("objectLiteralFunction", () => {
  it("returns the literal's properties in order, each name taken as a key and never as code", () => {
    const names = ['a"b', "c\\d", "}; throw 1; ({", "line\nbreak", "2", "ü", ""];
    const make = objectLiteralFunction<(v: unknown[]) => Record<string, unknown>>(
      ["v"],
      names.map((n, i) => [n, `v[${i}]`]),
    );
    const values = names.map((_, i) => i * 10);
    const made = make(values);
    expect(made).toEqual(Object.fromEntries(names.map((n, i) => [n, i * 10])));
    // Integer-like keys come first in any object (the language's order); the rest keep the given order.
    expect(Object.keys(made)).toEqual(["2", ...names.filter((n) => n !== "2")]);
    expect(Object.getPrototypeOf(made)).toBe(Object.prototype);
  });

  it("refuses __proto__, which a literal would take as the prototype", () => {
    expect(() => objectLiteralFunction(["v"], [["__proto__", "v"]])).toThrow(/__proto__/);
  });
});
