import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { getConfig } from "../../config.js";
import { AppError } from "../../errors.js";
import type { ThreadJob } from "./worker.js";

let entry: Promise<string> | undefined;

/**
 * The worker's script: the compiled worker.js beside this module (dist). Run from TypeScript sources
 * (vitest, where a worker thread gets no transform), it is bundled once per process with esbuild, a
 * development dependency that production never reaches.
 */
function workerEntry(): Promise<string> {
  entry ??= (async () => {
    const compiled = fileURLToPath(new URL("./worker.js", import.meta.url));
    if (existsSync(compiled)) return compiled;
    const source = fileURLToPath(new URL("./worker.ts", import.meta.url));
    const outfile = join(tmpdir(), `agentmarket-tools-worker-${process.pid}.mjs`);
    const esbuild = await import("esbuild");
    await esbuild.build({
      entryPoints: [source],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outfile,
      logLevel: "silent",
      banner: {
        js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
      },
    });
    return outfile;
  })();
  return entry;
}

/**
 * Runs a job in a fresh worker thread with a heap limit (PARSE_MAX_MEMORY_MB) and a hard deadline (then
 * terminate). Past the deadline → 504 TIMEOUT; out of memory or a crash → 502 PROVIDER_FAILED: either
 * way the call fails, so the buyer's hold is released. `what` names the work in messages and reasons.
 */
export async function runInThread<T>(
  task: ThreadJob,
  deadlineMs: number,
  what: "parse" | "extract",
): Promise<T> {
  const { parseMaxMemoryMb } = getConfig();
  const parseDeadlineMs = deadlineMs;
  const worker = new Worker(await workerEntry(), {
    resourceLimits: {
      maxOldGenerationSizeMb: parseMaxMemoryMb,
      maxYoungGenerationSizeMb: Math.min(32, Math.max(8, Math.floor(parseMaxMemoryMb / 4))),
      stackSizeMb: 4,
    },
    stdout: true,
    stderr: true,
  });
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
      void worker.terminate();
    };
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(
            new AppError("TIMEOUT", `the ${what} step did not finish within ${parseDeadlineMs} ms`, {
              reason: `${what}_deadline_exceeded`,
            }),
          ),
        ),
      parseDeadlineMs,
    );
    worker.once("message", (answer: { ok: true; output: T } | { ok: false; message: string }) =>
      finish(() => {
        if (answer.ok) resolve(answer.output);
        else
          reject(
            new AppError("PROVIDER_FAILED", `the ${what} step failed`, {
              reason: `${what}_failed`,
              message: answer.message,
            }),
          );
      }),
    );
    worker.once("error", (error) =>
      finish(() => {
        const oom = /memory/i.test(String((error as { code?: string }).code ?? error.message));
        reject(
          new AppError("PROVIDER_FAILED", `the ${what} step failed (memory limit or crash)`, {
            reason: oom ? `${what}_memory_exceeded` : `${what}_failed`,
          }),
        );
      }),
    );
    worker.once("exit", (code) =>
      finish(() =>
        reject(
          new AppError("PROVIDER_FAILED", `the ${what} worker stopped`, {
            reason: `${what}_failed`,
            exit_code: code,
          }),
        ),
      ),
    );
    worker.postMessage(task);
  });
}
