import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import { PARSE_BOUNDS } from "../../shared/tools/parse/bounds.js";
import { decodeDocument } from "../../shared/tools/parse/document.js";
import { parseDocument } from "../../shared/tools/parse/parse.js";
import { runParser } from "../../shared/tools/parse/run-parser.js";
import { PARSE_FORMATS } from "../../shared/tools/parse/schemas.js";

// The hostile corpus and property tests (issue #16 point 2): no input crashes the process, outlives the
// deadline or exceeds the output bound. Every answer is either a bounded output or an AppError of the
// table (400 input, 504 deadline, 502 failure): a hold is then released, never charged.

/** Providers' answers are capped at 1 MB: every parse output must serialize well under it. */
const OUTPUT_BYTES_BOUND = 1_000_000;
const original = getConfig();
afterEach(() => {
  overrideConfig(original);
});

const MB = 1_048_576;
const corpus: [string, (typeof PARSE_FORMATS)[number], string][] = [
  ["deep JSON arrays", "json", `${"[".repeat(400_000)}${"]".repeat(400_000)}`],
  ["deep JSON objects", "json", `${'{"a":'.repeat(150_000)}1${"}".repeat(150_000)}`],
  ["unclosed deep JSON", "json", "[".repeat(MB - 1)],
  ["deep HTML", "html", "<div>".repeat(200_000)],
  ["wide HTML", "html", "<p>x</p>".repeat(130_000)],
  ["unclosed HTML attribute", "html", `<a href="${"x".repeat(MB - 20)}`],
  ["HTML link flood", "html", '<a href="https://e.example/x">l</a>'.repeat(29_000)],
  ["markdown emphasis run", "markdown", "*a".repeat(20_000)],
  ["markdown open links", "markdown", "[a](".repeat(20_000)],
  ["markdown nested quotes", "markdown", `${">".repeat(100_000)} x`],
  [
    "markdown nested lists",
    "markdown",
    Array.from({ length: 3000 }, (_, i) => `${"  ".repeat(i)}- x`).join("\n"),
  ],
  ["markdown heading flood", "markdown", "# h\n".repeat(200_000)],
  ["CSV one huge row", "csv", "a,".repeat(MB / 2 - 1)],
  ["CSV one huge cell", "csv", `h\n${"x".repeat(MB - 5)}`],
  ["CSV unbalanced quote", "csv", `"${"a,b\n".repeat(200_000)}`],
  ["CSV newline flood", "csv", "\n".repeat(MB)],
  ["CSV repetition", "csv", "1,2,3,true,2026-01-01\n".repeat(47_000)],
  ["BOM only", "csv", "\uFEFF"],
  // Character bounds alone would let these serialize past the byte bound (3-byte characters, escapes).
  ["CSV of control characters", "csv", `h\n${"\u0001".repeat(1999)}\n`.repeat(260)],
  ["HTML of 3-byte characters", "html", `<p>${"界".repeat(340_000)}</p>`],
  ["markdown of escapes", "markdown", `${"\u0002".repeat(1990)}\n\n`.repeat(500)],
  ["empty", "json", ""],
];

function assertBounded(output: unknown): void {
  const size = Buffer.byteLength(JSON.stringify(output));
  expect(size).toBeLessThan(OUTPUT_BYTES_BOUND);
}

describe("the hostile corpus, through the worker thread", () => {
  it.each(corpus)("%s: a bounded answer or a table error, never a crash", async (_name, format, content) => {
    try {
      const { output } = await parseDocument({ format, content });
      assertBounded(output);
      expect(typeof output.truncated).toBe("boolean");
      if (_name.startsWith("CSV of control") || _name.startsWith("HTML of 3-byte"))
        expect(output.truncated).toBe(true);
    } catch (error) {
      expect(error).toBeInstanceOf(AppError);
      expect(["TIMEOUT", "PROVIDER_FAILED", "SCHEMA_VALIDATION_FAILED"]).toContain((error as AppError).code);
    }
  });

  it("terminates a parse past the deadline with 504 TIMEOUT parse_deadline_exceeded", async () => {
    overrideConfig({ ...original, parseDeadlineMs: 100 });
    const hostile = "*a".repeat(500_000);
    await expect(parseDocument({ format: "markdown", content: hostile })).rejects.toMatchObject({
      code: "TIMEOUT",
      details: { reason: "parse_deadline_exceeded" },
    });
    // The process is fine and the next parse runs.
    overrideConfig(original);
    const { output } = await parseDocument({ format: "csv", content: "a\n1\n" });
    expect(output).toMatchObject({ format: "csv", rows: [[1]] });
  });

  it("a worker over its heap limit fails the call (502 parse_memory_exceeded); the next parse runs", async () => {
    overrideConfig({ ...original, parseMaxMemoryMb: 8 });
    const objects = `[${'{"k":[1,2,3]},'.repeat(70_000)}{}]`;
    await expect(parseDocument({ format: "json", content: objects })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
      details: { reason: "parse_memory_exceeded" },
    });
    overrideConfig(original);
    const { output } = await parseDocument({ format: "json", content: objects });
    expect(output).toMatchObject({ format: "json", valid: true });
  });

  it("flags a cut output: a CSV over the row bound is truncated", async () => {
    const content = `n\n${"1\n".repeat(PARSE_BOUNDS.csvRows + 1)}`;
    const { output } = await parseDocument({ format: "csv", content });
    expect(output.truncated).toBe(true);
  });
});

describe("properties (in process, the same parsers the worker runs)", () => {
  const format = fc.constantFrom(...PARSE_FORMATS);
  const delimiter = fc.constantFrom(",", ";", "\t", "|");

  it("any text in any format: a bounded output with a boolean truncated flag", () => {
    fc.assert(
      fc.property(
        format,
        fc.string({ unit: "binary", maxLength: 2000 }),
        delimiter,
        fc.boolean(),
        (f, text, d, h) => {
          const output = runParser(decodeDocument({ format: f, content: text, delimiter: d, has_header: h }));
          expect(output.format).toBe(f);
          expect(typeof output.truncated).toBe("boolean");
          assertBounded(output);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("any bytes as content_base64: parsed, or refused as a binary with a 400", () => {
    fc.assert(
      fc.property(format, fc.uint8Array({ maxLength: 2000 }), (f, bytes) => {
        const content_base64 = Buffer.from(bytes).toString("base64");
        try {
          assertBounded(runParser(decodeDocument({ format: f, content_base64 })));
        } catch (error) {
          expect(error).toMatchObject({ code: "SCHEMA_VALIDATION_FAILED" });
        }
      }),
      { numRuns: 300 },
    );
  });

  it("any JSON value round-trips through the echo with a node count that matches", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        const text = JSON.stringify(value);
        const output = runParser(decodeDocument({ format: "json", content: text }));
        expect(output).toMatchObject({ valid: true, truncated: false });
        expect(JSON.stringify((output as { value: unknown }).value)).toBe(JSON.stringify(JSON.parse(text)));
      }),
      { numRuns: 300 },
    );
  });

  it("CSV rows of any cells keep their row count and column count", () => {
    const cell = fc.stringMatching(/^[a-z0-9 .-]{0,12}$/);
    fc.assert(
      fc.property(
        fc.array(fc.array(cell, { minLength: 3, maxLength: 3 }), { minLength: 1, maxLength: 40 }),
        (rows) => {
          const text = rows.map((r) => r.join(",")).join("\n");
          const output = runParser(decodeDocument({ format: "csv", content: text, has_header: false }));
          // Three cells always make two delimiters, so no line is empty and none is skipped.
          expect((output as { rows: unknown[] }).rows).toHaveLength(rows.length);
          expect((output as { columns: unknown[] }).columns).toHaveLength(3);
        },
      ),
      { numRuns: 200 },
    );
  });
});
