import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// The listing record's builders run ~50 times a record, a hundred records a catalog page. Node 20's V8
// builds an object literal that begins with a spread (`{ ...a, b }`) by a slow copy, ~0.7 µs a literal
// and every later spread into it slow as well; seven such literals were half of a page's build time
// (docs/benchmarks.md "The thirty-seventh round"). Their first field is written plainly instead
// (values.ts nullReason). This keeps it so.

const DIR = join(import.meta.dirname, "../../shared/catalog/listing-record");

/** `file:line` of every object literal in the source that begins with a spread and has more after it. */
function leadingSpreads(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (
      ts.isObjectLiteralExpression(node) &&
      node.properties.length > 1 &&
      ts.isSpreadAssignment(node.properties[0]!)
    ) {
      found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("the listing record's builders", () => {
  it("begin no object literal with a spread", () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith(".ts"));
    expect(files.length).toBeGreaterThan(5);
    const found = files.flatMap((f) => leadingSpreads(f, readFileSync(join(DIR, f), "utf8")));
    expect(found).toEqual([]);
  });

  it("are found by the scan when they do", () => {
    expect(
      leadingSpreads("x.ts", "const a = { ...b, c: 1 }; const d = { c: 1, ...b }; const e = { ...b };"),
    ).toEqual(["x.ts:1"]);
  });
});
