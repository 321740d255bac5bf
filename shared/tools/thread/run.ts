import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { getConfig } from "../../config.js";
import { AppError } from "../../errors.js";
import type { ThreadJob } from "./worker.js";

/** Warm workers kept between jobs: starting one costs far more than most parses (bench:tools). */
export const IDLE_WORKERS = 2;

let entry: Promise<string> | undefined;
const idle: Worker[] = [];
/** The heap limit each worker was started with: a warm worker is reused only under the same limit. */
const heapLimits = new WeakMap<Worker, number>();

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

async function takeWorker(): Promise<Worker> {
  const { parseMaxMemoryMb } = getConfig();
  for (let warm = idle.pop(); warm; warm = idle.pop()) {
    if (heapLimits.get(warm) === parseMaxMemoryMb) return warm;
    void warm.terminate();
  }
  const worker = new Worker(await workerEntry(), {
    resourceLimits: {
      maxOldGenerationSizeMb: parseMaxMemoryMb,
      maxYoungGenerationSizeMb: Math.min(32, Math.max(8, Math.floor(parseMaxMemoryMb / 4))),
      stackSizeMb: 4,
    },
    stdout: true,
    stderr: true,
  });
  heapLimits.set(worker, parseMaxMemoryMb);
  // An idle worker must not keep the process alive.
  worker.unref();
  return worker;
}

function giveBack(worker: Worker): void {
  if (idle.length < IDLE_WORKERS) idle.push(worker);
  else void worker.terminate();
}

/**
 * Runs a job in a worker thread (a warm one when idle, else a fresh one) with a heap limit
 * (PARSE_MAX_MEMORY_MB) and a hard deadline. Past the deadline the worker is terminated → 504 TIMEOUT; out
 * of memory or a crash → 502 PROVIDER_FAILED: either way the call fails, so the buyer's hold is
 * released. A worker that failed is never reused. `what` names the work in messages and reasons.
 */
export async function runInThread<T>(
  task: ThreadJob,
  deadlineMs: number,
  what: "parse" | "extract",
): Promise<T> {
  const worker = await takeWorker();
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const finish = (fn: () => void, reusable: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
      if (reusable) giveBack(worker);
      else void worker.terminate();
      fn();
    };
    const onMessage = (answer: { ok: true; output: T } | { ok: false; message: string }) =>
      finish(() => {
        if (answer.ok) resolve(answer.output);
        else
          reject(
            new AppError("PROVIDER_FAILED", `the ${what} step failed`, {
              reason: `${what}_failed`,
              message: answer.message,
            }),
          );
      }, answer.ok);
    const onError = (error: Error) =>
      finish(() => {
        const oom = /memory/i.test(String((error as { code?: string }).code ?? error.message));
        reject(
          new AppError("PROVIDER_FAILED", `the ${what} step failed (memory limit or crash)`, {
            reason: oom ? `${what}_memory_exceeded` : `${what}_failed`,
          }),
        );
      }, false);
    const onExit = (code: number) =>
      finish(
        () =>
          reject(
            new AppError("PROVIDER_FAILED", `the ${what} worker stopped`, {
              reason: `${what}_failed`,
              exit_code: code,
            }),
          ),
        false,
      );
    const timer = setTimeout(
      () =>
        finish(
          () =>
            reject(
              new AppError("TIMEOUT", `the ${what} step did not finish within ${deadlineMs} ms`, {
                reason: `${what}_deadline_exceeded`,
              }),
            ),
          false,
        ),
      deadlineMs,
    );
    worker.on("message", onMessage);
    worker.once("error", onError);
    worker.once("exit", onExit);
    worker.postMessage(task);
  });
}

/** Stops the warm workers (process shutdown, tests). */
export async function closeToolThreads(): Promise<void> {
  await Promise.all(idle.splice(0).map((w) => w.terminate()));
}
