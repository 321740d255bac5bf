import { type Static, Type } from "@sinclair/typebox";

/** The largest document accepted: 1 MB of text, or of decoded content_base64 (spec "Limits"). */
export const PARSE_MAX_INPUT_BYTES = 1_048_576;
/** Base64 of PARSE_MAX_INPUT_BYTES bytes. */
const BASE64_MAX_CHARS = Math.ceil(PARSE_MAX_INPUT_BYTES / 3) * 4;

export const PARSE_FORMATS = ["csv", "json", "markdown", "html"] as const;
export const CSV_DELIMITERS = [",", ";", "\t", "|"] as const;

/** Document parse input (spec "Tool services"): one of content or content_base64. */
export const ParseInput = Type.Object(
  {
    format: Type.Union(
      PARSE_FORMATS.map((f) => Type.Literal(f)),
      { description: "csv, json, markdown or html" },
    ),
    content: Type.Optional(
      Type.String({
        maxLength: PARSE_MAX_INPUT_BYTES,
        // A PDF is refused before any money is held; decodeDocument checks the bytes again.
        not: { pattern: "^\\uFEFF?%PDF-" },
        description: "the document, up to 1 MB of UTF-8 text (not PDF or Office)",
      }),
    ),
    content_base64: Type.Optional(
      Type.String({
        maxLength: BASE64_MAX_CHARS,
        // Base64 only, and not the base64 of a PDF (%PDF-), Office zip (PK\\3\\4) or OLE file, nor a
        // BOM-prefixed PDF: refused before any money is held; decodeDocument checks the bytes again.
        pattern: "^(?!\\s*(?:JVBERi|UEsDB|0M8R4KGxGuE|77u/JVBERi))[A-Za-z0-9+/=\\s_-]*$",
        description: "the document as base64 of UTF-8 bytes, up to 1 MB decoded",
      }),
    ),
    delimiter: Type.Optional(
      Type.Union(
        CSV_DELIMITERS.map((d) => Type.Literal(d)),
        { default: ",", description: "CSV only: , ; tab or |" },
      ),
    ),
    has_header: Type.Optional(
      Type.Boolean({ default: true, description: "CSV only: the first row names the columns" }),
    ),
  },
  {
    additionalProperties: false,
    oneOf: [{ required: ["content"] }, { required: ["content_base64"] }],
  },
);
export type ParseInputT = Static<typeof ParseInput>;

export const ParseOutput = Type.Object(
  {
    format: Type.Union(PARSE_FORMATS.map((f) => Type.Literal(f))),
    truncated: Type.Boolean({ description: "true when any part of the output was cut at its bound" }),
    input_bytes: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: true },
);
