import { fitToBytes } from "../output-bound.js";
import { parseCsv } from "./csv.js";
import type { ParseJob } from "./document.js";
import { parseHtml } from "./html.js";
import { parseJson } from "./json.js";
import { parseMarkdown } from "./markdown.js";

// The parsers' side of document parse, apart from the decoding (document.ts) that runs in the request:
// only the tools' worker thread loads these libraries (htmlparser2, html-to-text, marked, papaparse).

/** Runs the job's parser (inside the parse worker thread; tests call it directly), within the byte bound. */
export function runParser(job: ParseJob) {
  const common = { input_bytes: job.inputBytes, warnings: job.warnings };
  switch (job.format) {
    case "csv": {
      const out = fitToBytes(
        { ...parseCsv(job.text, job.delimiter, job.hasHeader), ...common },
        { arrays: ["rows"] },
      );
      out.row_count = out.rows.length;
      return out;
    }
    case "json":
      return fitToBytes({ ...parseJson(job.text), ...common }, { nulls: ["value"] });
    case "markdown":
      return fitToBytes({ ...parseMarkdown(job.text), ...common }, { arrays: ["blocks", "toc"] });
    case "html":
      return fitToBytes({ ...parseHtml(job.text), ...common }, { arrays: ["links"], strings: ["text"] });
  }
}
