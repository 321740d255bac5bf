import { AppError, validationError } from "../../errors.js";
import { PARSE_MAX_INPUT_BYTES, type ParseInputT } from "./schemas.js";

/** What one parse is asked to do: a decoded document and its options (a worker's message). */
export interface ParseJob {
  format: ParseInputT["format"];
  text: string;
  delimiter: string;
  hasHeader: boolean;
  inputBytes: number;
  warnings: string[];
}

const BINARY_MAGIC: [string, Buffer][] = [
  ["pdf", Buffer.from("%PDF-")],
  ["office_zip", Buffer.from([0x50, 0x4b, 0x03, 0x04])],
  ["office_ole", Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1])],
];

/** The binary kind a document's first bytes announce (PDF, Office zip or OLE), or null. */
export function binaryKind(bytes: Buffer): string | null {
  for (const [kind, magic] of BINARY_MAGIC) if (bytes.subarray(0, magic.length).equals(magic)) return kind;
  return null;
}

function refuseBinary(kind: string, path: string): never {
  throw new AppError(
    "SCHEMA_VALIDATION_FAILED",
    "document parse reads csv, json, markdown and html text; PDF and Office binaries are not parsed",
    {
      reason: "unsupported_document_type",
      detected: kind,
      violations: [{ path, message: `a ${kind} binary is not a supported document` }],
    },
  );
}

/**
 * Decodes the input to text: content as given, or content_base64 as UTF-8. Refuses over 1 MB and PDF or
 * Office binaries; strips a byte-order mark; replaces invalid UTF-8 (and says so in warnings).
 */
export function decodeDocument(input: ParseInputT): ParseJob {
  const warnings: string[] = [];
  let bytes: Buffer;
  let path: string;
  if (typeof input.content === "string") {
    bytes = Buffer.from(input.content, "utf8");
    path = "/input/content";
  } else if (typeof input.content_base64 === "string") {
    bytes = Buffer.from(input.content_base64, "base64");
    path = "/input/content_base64";
  } else {
    throw validationError("one of content or content_base64 is required", [
      { path: "/input", message: "send content or content_base64" },
    ]);
  }
  if (bytes.length > PARSE_MAX_INPUT_BYTES) {
    throw validationError(`the document is over ${PARSE_MAX_INPUT_BYTES} bytes`, [
      { path, message: `at most ${PARSE_MAX_INPUT_BYTES} bytes (decoded)` },
    ]);
  }
  const withoutBom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? bytes.subarray(3) : bytes;
  const kind = binaryKind(withoutBom);
  if (kind) refuseBinary(kind, path);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(withoutBom);
  } catch {
    text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(withoutBom);
    warnings.push("invalid_utf8_replaced");
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  return {
    format: input.format,
    text,
    delimiter: input.delimiter ?? ",",
    hasHeader: input.has_header ?? true,
    inputBytes: bytes.length,
    warnings,
  };
}
