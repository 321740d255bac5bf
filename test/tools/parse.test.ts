import { describe, expect, it } from "vitest";
import { PARSE_BOUNDS } from "../../shared/tools/parse/bounds.js";
import { inferColumnType, parseCsv } from "../../shared/tools/parse/csv.js";
import { decodeDocument } from "../../shared/tools/parse/document.js";
import { parseHtml, safeHtmlPrefix } from "../../shared/tools/parse/html.js";
import { parseJson } from "../../shared/tools/parse/json.js";
import { parseMarkdown } from "../../shared/tools/parse/markdown.js";
import { parseDocument } from "../../shared/tools/parse/parse.js";
import { runParser } from "../../shared/tools/parse/run-parser.js";

// The document-parse tool's parsers, called directly (fast), and once each through the worker thread.

describe("CSV", () => {
  it("types each column from all its values: integer, number, boolean, date, string; empty → null", () => {
    const out = parseCsv("id,price,ok,day,name\n1,2.5,true,2026-01-02,a\n2,,FALSE,2026-02-03,b\n", ",", true);
    expect(out.columns).toEqual([
      { name: "id", type: "integer" },
      { name: "price", type: "number" },
      { name: "ok", type: "boolean" },
      { name: "day", type: "date" },
      { name: "name", type: "string" },
    ]);
    expect(out.rows).toEqual([
      [1, 2.5, true, "2026-01-02", "a"],
      [2, null, false, "2026-02-03", "b"],
    ]);
    expect(out.truncated).toBe(false);
  });

  it.each([
    [";", "a;b\n1;2\n"],
    ["\t", "a\tb\n1\t2\n"],
    ["|", "a|b\n1|2\n"],
  ])("splits on the delimiter %j", (delimiter, text) => {
    const out = parseCsv(text, delimiter, true);
    expect(out.columns.map((c) => c.name)).toEqual(["a", "b"]);
    expect(out.rows).toEqual([[1, 2]]);
  });

  it("without a header names the columns column_N and keeps the first row as data", () => {
    const out = parseCsv("1,x\n2,y\n", ",", false);
    expect(out.columns.map((c) => c.name)).toEqual(["column_1", "column_2"]);
    expect(out.rows).toEqual([
      [1, "x"],
      [2, "y"],
    ]);
  });

  it("keeps an unsafe integer column as strings, and a __proto__ header as a plain column", () => {
    const out = parseCsv("__proto__,big\n1,12345678901234567890\n", ",", true);
    expect(out.columns).toEqual([
      { name: "__proto__", type: "integer" },
      { name: "big", type: "string" },
    ]);
    expect(out.rows).toEqual([[1, "12345678901234567890"]]);
    expect(inferColumnType(["12345678901234567890", "1.5"])).toBe("string");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("de-duplicates and fills blank header names", () => {
    const out = parseCsv("a,a,\n1,2,3\n", ",", true);
    expect(out.columns.map((c) => c.name)).toEqual(["a", "a_2", "column_3"]);
  });

  it("cuts rows past the row bound and says so", () => {
    const text = `n\n${Array.from({ length: PARSE_BOUNDS.csvRows + 5 }, (_, i) => i).join("\n")}\n`;
    const out = parseCsv(text, ",", true);
    expect(out.rows).toHaveLength(PARSE_BOUNDS.csvRows);
    expect(out.truncated).toBe(true);
  });

  it("cuts a huge cell and a huge row to their bounds", () => {
    const wide = Array.from({ length: 400 }, (_, i) => `c${i}`).join(",");
    const out = parseCsv(`${wide}\n${"x".repeat(50_000)}\n`, ",", true);
    expect(out.columns).toHaveLength(PARSE_BOUNDS.csvColumns);
    expect(String(out.rows[0]![0]).length).toBe(PARSE_BOUNDS.cellChars);
    expect(out.truncated).toBe(true);
  });
});

describe("JSON", () => {
  it("echoes the value with shape stats per path", () => {
    const out = parseJson('{"a":[1,2,{"b":null}],"c":"x"}');
    expect(out.valid).toBe(true);
    expect(out.value).toEqual({ a: [1, 2, { b: null }], c: "x" });
    expect(out.stats).toMatchObject({
      root_type: "object",
      max_depth: 4,
      max_array_length: 3,
      max_object_keys: 2,
    });
    expect(out.stats.counts).toEqual({ object: 2, array: 1, string: 1, number: 2, boolean: 0, null: 1 });
    expect(out.stats.paths).toContainEqual({ path: "$.a[]", types: { number: 2, object: 1 } });
    expect(out.truncated).toBe(false);
  });

  it("reports invalid JSON as invalid, not as an error of the call", () => {
    const out = parseJson("{nope");
    expect(out).toMatchObject({ valid: false, value: null, truncated: false });
    expect(out.error).toEqual(expect.any(String));
  });

  it("walks 100k levels of nesting without recursion and leaves the echo out", () => {
    const depth = 100_000;
    const out = parseJson(`${"[".repeat(depth)}${"]".repeat(depth)}`);
    expect(out.stats.max_depth).toBe(depth);
    expect(out.value).toBeNull();
    expect(out.truncated).toBe(true);
  });

  it("keeps __proto__ an ordinary key", () => {
    const out = parseJson('{"__proto__":{"polluted":1}}');
    expect(Object.keys(out.value as object)).toEqual(["__proto__"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("Markdown", () => {
  it("answers blocks and a table of contents with GitHub slugs, de-duplicated", () => {
    const out = parseMarkdown("# Title\n\nText here.\n\n## Part\n\n- a\n- b\n\n## Part\n\n```js\nx()\n```\n");
    expect(out.title).toBe("Title");
    expect(out.toc).toEqual([
      { depth: 1, text: "Title", slug: "title" },
      { depth: 2, text: "Part", slug: "part" },
      { depth: 2, text: "Part", slug: "part-1" },
    ]);
    expect(out.blocks.map((b) => b.type)).toEqual([
      "heading",
      "paragraph",
      "heading",
      "list",
      "heading",
      "code",
    ]);
    expect(out.blocks[3]).toMatchObject({ type: "list", items: 2, ordered: false });
    expect(out.blocks[5]).toMatchObject({ type: "code", lang: "js", text: "x()" });
  });

  it("counts table rows", () => {
    const out = parseMarkdown("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n");
    expect(out.blocks[0]).toMatchObject({ type: "table", rows: 2 });
  });
});

describe("HTML", () => {
  it("answers plain text, the title and usable links", () => {
    const out = parseHtml(
      '<html><head><title> My  page </title><script>evil()</script></head><body><h1>Hi</h1><p>Some <b>bold</b> text. <a href="https://x.example/a">A</a> <a href="javascript:alert(1)">bad</a> <a href="/rel">rel</a></p></body></html>',
    );
    expect(out.title).toBe("My page");
    expect(out.text).toContain("Some bold text.");
    expect(out.text).not.toContain("evil");
    expect(out.links).toEqual([
      { href: "https://x.example/a", text: "A" },
      { href: "/rel", text: "rel" },
    ]);
  });

  it("cuts a 100k-deep document at the depth guard before building a tree", () => {
    const html = `<html><body>${"<div>".repeat(100_000)}deep${"</div>".repeat(100_000)}</body></html>`;
    const prefix = safeHtmlPrefix(html);
    expect(prefix.cut).toBe(true);
    expect(prefix.html.length).toBeLessThan(html.length);
    const out = parseHtml(html);
    expect(out.truncated).toBe(true);
  });
});

describe("decoding the input", () => {
  const b64 = (bytes: Buffer | string) => Buffer.from(bytes).toString("base64");

  it("decodes content_base64 as UTF-8 and strips a byte-order mark", () => {
    const job = decodeDocument({ format: "csv", content_base64: b64("\uFEFFa,b\n1,2\n") });
    expect(job.text).toBe("a,b\n1,2\n");
    expect(job.warnings).toEqual([]);
  });

  it("replaces invalid UTF-8 and says so", () => {
    const job = decodeDocument({
      format: "markdown",
      content_base64: b64(Buffer.from([0x61, 0xff, 0xfe, 0x62])),
    });
    expect(job.text).toBe("a\uFFFD\uFFFDb");
    expect(job.warnings).toEqual(["invalid_utf8_replaced"]);
  });

  it.each([
    ["PDF", Buffer.from("%PDF-1.7\n...")],
    ["Office zip", Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00])],
    ["OLE", Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0x00])],
  ])("refuses a %s binary with 400 unsupported_document_type", (_name, bytes) => {
    expect(() => decodeDocument({ format: "html", content_base64: b64(bytes) })).toThrow(
      expect.objectContaining({
        code: "SCHEMA_VALIDATION_FAILED",
        details: expect.objectContaining({ reason: "unsupported_document_type" }),
      }),
    );
  });

  it("refuses more than 1 MB decoded", () => {
    const big = Buffer.alloc(1_048_577, 0x61);
    expect(() => decodeDocument({ format: "markdown", content_base64: b64(big) })).toThrow(
      expect.objectContaining({ code: "SCHEMA_VALIDATION_FAILED" }),
    );
    expect(runParser(decodeDocument({ format: "markdown", content: "a".repeat(1_048_576) })).format).toBe(
      "markdown",
    );
  });
});

describe("in the worker thread", () => {
  it.each([
    ["csv", "a,b\n1,2\n"],
    ["json", '{"a":1}'],
    ["markdown", "# T\n"],
    ["html", "<title>T</title><p>x</p>"],
  ] as const)("parses %s the same as in process", async (format, content) => {
    const { output } = await parseDocument({ format, content });
    expect(output).toEqual(JSON.parse(JSON.stringify(runParser(decodeDocument({ format, content })))));
  });
});
