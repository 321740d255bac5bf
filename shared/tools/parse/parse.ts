import { getConfig } from "../../config.js";
import { runInThread } from "../thread/run.js";
import { decodeDocument } from "./document.js";
import type { runParser } from "./run-parser.js";
import type { ParseInputT } from "./schemas.js";

export type ParseResult = ReturnType<typeof runParser>;

/** The document-parse tool: decode and check the input here, parse in a bounded worker thread. */
export async function parseDocument(input: ParseInputT): Promise<{ success: true; output: ParseResult }> {
  const job = decodeDocument(input);
  const output = await runInThread<ParseResult>({ kind: "parse", job }, getConfig().parseDeadlineMs, "parse");
  return { success: true, output };
}
