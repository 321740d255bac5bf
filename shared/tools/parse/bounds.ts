// The output bounds of a document parse (docs/tools.md "Bounds"). A provider answer is capped at
// PROVIDER_RESPONSE_MAX_BYTES (1 MB by default), so every output stays well under it; anything cut is
// reported with truncated: true.

export const PARSE_BOUNDS = {
  /** CSV: rows returned (data rows, header excluded). */
  csvRows: 10_000,
  /** CSV: columns per row. */
  csvColumns: 256,
  /** CSV and text fields: characters per cell. */
  cellChars: 2_000,
  /** Serialized characters of all returned rows, JSON echo, blocks or text. */
  outputChars: 600_000,
  /** JSON: depth past which the echo is left out (serializing deeper values risks the stack). */
  jsonEchoDepth: 64,
  /** JSON: distinct paths reported in the shape stats. */
  jsonPaths: 200,
  /** Markdown: blocks returned. */
  markdownBlocks: 2_000,
  /** Markdown: table-of-contents entries. */
  tocEntries: 500,
  /** HTML: element depth and element count past which the document is cut (SAX pre-scan). */
  htmlDepth: 400,
  htmlElements: 50_000,
  /** HTML: links returned. */
  htmlLinks: 1_000,
  /** HTML: characters of plain text returned. */
  textChars: 200_000,
} as const;

/** A string cut to max characters (never splitting a surrogate pair), and whether it was cut. */
export function clip(value: string, max: number): { text: string; cut: boolean } {
  if (value.length <= max) return { text: value, cut: false };
  let end = max;
  const code = value.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return { text: value.slice(0, end), cut: true };
}
