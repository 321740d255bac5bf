import { parentPort } from "node:worker_threads";
import { type ParseJob, runParser } from "../parse/document.js";
import { type ExtractJob, extractPage } from "../scrape/extract.js";

// The tools' worker thread entry: one job in, one answer out. It runs with resourceLimits and is
// terminated at the deadline by run.ts; a parser's blow-up costs this thread, never the process.

export type ThreadJob = { kind: "parse"; job: ParseJob } | { kind: "extract"; job: ExtractJob };

function run(task: ThreadJob): unknown {
  return task.kind === "parse" ? runParser(task.job) : extractPage(task.job);
}

parentPort?.once("message", (task: ThreadJob) => {
  try {
    parentPort?.postMessage({ ok: true, output: run(task) });
  } catch (error) {
    parentPort?.postMessage({ ok: false, message: String((error as Error)?.message ?? error).slice(0, 300) });
  }
});
