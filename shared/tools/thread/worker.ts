import { parentPort } from "node:worker_threads";
import type { ParseJob } from "../parse/document.js";
import type { ExtractJob } from "../scrape/extract.js";

// The tools' worker thread entry: jobs in, one answer per job out, one job at a time. It runs with
// resourceLimits and is terminated at a job's deadline by run.ts, so a parser's blow-up costs this
// thread, never the process. Each kind's libraries load on its first job only.

export type ThreadJob = { kind: "parse"; job: ParseJob } | { kind: "extract"; job: ExtractJob };

async function run(task: ThreadJob): Promise<unknown> {
  if (task.kind === "parse") return (await import("../parse/run-parser.js")).runParser(task.job);
  return (await import("../scrape/extract.js")).extractPage(task.job);
}

parentPort?.on("message", (task: ThreadJob) => {
  run(task).then(
    (output) => parentPort?.postMessage({ ok: true, output }),
    (error: unknown) =>
      parentPort?.postMessage({
        ok: false,
        message: String((error as Error)?.message ?? error).slice(0, 300),
      }),
  );
});
