import { describe, expect, it } from "vitest";
import { EncodedJson, encodeWithArray } from "../../shared/kernel/encoded-json.js";

// encodeWithArray puts a document together from its array's items already encoded (kept listing
// records): the bytes must be exactly what JSON.stringify gives for the whole object.

const bytes = (value: unknown) => Buffer.from(JSON.stringify(value));

describe("encodeWithArray", () => {
  const items = [{ id: 1, name: "ünïcode — ok" }, { id: 2, nested: { a: [1, null, "x"] } }, "text"];
  const cases: [string, object, unknown[], object][] = [
    [
      "head, items and rest",
      { schema: "s", at: "2026-11-29T00:00:00.000Z" },
      items,
      { total: 3, more: false },
    ],
    ["no head", {}, items, { total: 3 }],
    ["no rest", { schema: "s" }, items, {}],
    ["neither", {}, items, {}],
    ["no items", { schema: "s" }, [], { total: 0 }],
    ["one item", {}, [items[0]], { total: 1 }],
  ];
  for (const [what, head, list, rest] of cases) {
    it(`is JSON.stringify's bytes: ${what}`, () => {
      const encoded = encodeWithArray("capabilities", list.map(bytes), rest, head);
      const expected = JSON.stringify({ ...head, capabilities: list, ...rest });
      expect(encoded.bytes().equals(Buffer.from(expected))).toBe(true);
      expect(encoded.byteLength).toBe(Buffer.byteLength(expected));
      expect(encoded.text()).toBe(expected);
      expect(encoded.parse()).toEqual(JSON.parse(expected));
    });
  }

  it("answers a document of one part with that part", () => {
    const part = bytes({ a: 1 });
    expect(new EncodedJson([part]).bytes()).toBe(part);
  });
});
