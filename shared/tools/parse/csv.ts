import Papa from "papaparse";
import { clip, PARSE_BOUNDS } from "./bounds.js";

export type ColumnType = "integer" | "number" | "boolean" | "date" | "string" | "empty";
export type Cell = string | number | boolean | null;

export interface CsvOutput {
  format: "csv";
  delimiter: string;
  has_header: boolean;
  columns: { name: string; type: ColumnType }[];
  rows: Cell[][];
  row_count: number;
  errors: { row: number | null; code: string; message: string }[];
  truncated: boolean;
}

const INTEGER = /^[-+]?\d+$/;
const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
const BOOLEAN = /^(?:true|false)$/i;
const DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

function fits(type: ColumnType, value: string): boolean {
  switch (type) {
    case "integer":
      return INTEGER.test(value) && Number.isSafeInteger(Number(value));
    case "number":
      // An integer beyond 2^53 would lose digits as a number: such a column stays strings.
      return (
        NUMBER.test(value) &&
        Number.isFinite(Number(value)) &&
        (!INTEGER.test(value) || Number.isSafeInteger(Number(value)))
      );
    case "boolean":
      return BOOLEAN.test(value);
    case "date":
      return DATE.test(value) && !Number.isNaN(Date.parse(value));
    default:
      return true;
  }
}

/** The most specific type every non-empty value of a column fits: integer, number, boolean, date, string. */
export function inferColumnType(values: Iterable<string>): ColumnType {
  const candidates: ColumnType[] = ["integer", "number", "boolean", "date"];
  let seen = false;
  for (const raw of values) {
    const value = raw.trim();
    if (value === "") continue;
    seen = true;
    for (let i = candidates.length - 1; i >= 0; i--)
      if (!fits(candidates[i]!, value)) candidates.splice(i, 1);
    if (candidates.length === 0) return "string";
  }
  if (!seen) return "empty";
  return candidates[0] ?? "string";
}

function typed(type: ColumnType, raw: string): Cell {
  const value = raw.trim();
  if (value === "") return null;
  if (type === "integer" || type === "number") return Number(value);
  if (type === "boolean") return value.toLowerCase() === "true";
  return raw;
}

/** Unique, non-empty column names: blanks become column_N, repeats get _2, _3… */
function columnNames(header: string[] | undefined, width: number): string[] {
  const used = new Set<string>();
  const names: string[] = [];
  for (let i = 0; i < width; i++) {
    const base = clip((header?.[i] ?? "").trim(), 200).text || `column_${i + 1}`;
    let name = base;
    for (let n = 2; used.has(name); n++) name = `${base}_${n}`;
    used.add(name);
    names.push(name);
  }
  return names;
}

/**
 * CSV → column names and typed rows. The delimiter is the caller's (spec default ","), never sniffed; each
 * column's type is inferred over all its returned values, then every cell is converted (empty → null).
 */
export function parseCsv(text: string, delimiter: string, hasHeader: boolean): CsvOutput {
  const parsed = Papa.parse<string[]>(text, {
    delimiter,
    header: false,
    dynamicTyping: false,
    skipEmptyLines: true,
    preview: PARSE_BOUNDS.csvRows + (hasHeader ? 1 : 0) + 1,
  });
  let truncated = false;
  const all = parsed.data;
  const header = hasHeader ? all[0] : undefined;
  const body = hasHeader ? all.slice(1) : all;
  if (body.length > PARSE_BOUNDS.csvRows) truncated = true;
  let width = header?.length ?? 0;
  for (const row of body) if (row.length > width) width = row.length;
  if (width > PARSE_BOUNDS.csvColumns) {
    width = PARSE_BOUNDS.csvColumns;
    truncated = true;
  }
  const rawRows: string[][] = [];
  let budget = PARSE_BOUNDS.outputChars;
  for (const row of body.slice(0, PARSE_BOUNDS.csvRows)) {
    const cells: string[] = [];
    let size = 2;
    for (let i = 0; i < width; i++) {
      const cell = clip(row[i] ?? "", PARSE_BOUNDS.cellChars);
      if (cell.cut) truncated = true;
      cells.push(cell.text);
      size += cell.text.length + 4;
    }
    budget -= size;
    if (budget < 0) {
      truncated = true;
      break;
    }
    rawRows.push(cells);
  }
  const names = columnNames(header, width);
  const types = names.map((_, i) => inferColumnType(rawRows.map((r) => r[i] ?? "")));
  return {
    format: "csv",
    delimiter,
    has_header: hasHeader,
    columns: names.map((name, i) => ({ name, type: types[i]! })),
    rows: rawRows.map((r) => r.map((cell, i) => typed(types[i]!, cell))),
    row_count: rawRows.length,
    errors: parsed.errors.slice(0, 20).map((e) => ({
      row: typeof e.row === "number" ? e.row : null,
      code: e.code,
      message: clip(e.message, 200).text,
    })),
    truncated,
  };
}
