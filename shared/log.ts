import { AsyncLocalStorage } from "node:async_hooks";
import { type DestinationStream, type Logger, pino } from "pino";
import { getConfig } from "./config.js";

let root: Logger | undefined;

/**
 * What every log line written inside a request, or inside the job that request caused, carries:
 * request_id (and the job's id and queue in a worker). Set by the request-id middleware and by the
 * worker's job wrapper (shared/observability/tracing.ts); read by pino's mixin on every line.
 *
 * Only while LOG_CONTEXT is on or tracing is: AsyncLocalStorage runs a hook for every promise the
 * process makes once any scope has been entered, and on Node 20 that took about a sixth of an
 * execute's CPU under load (docs/benchmarks.md "The seventh round"). Tracing keeps an async context
 * of its own anyway. Without it, the lines that matter name their request themselves: the request line,
 * the error envelope's log, the execute path's warnings, and a job's meta (enqueue's requestId).
 */
const scope = new AsyncLocalStorage<Record<string, string>>();
let tracingContext = false;

/** Tracing turned on or off (shared/observability/tracing.ts): log scopes follow it. */
export function logContextForTracing(on: boolean): void {
  tracingContext = on;
}

function scoping(): boolean {
  return tracingContext || getConfig().logContext;
}

/** Runs fn with these fields on every log line it writes (nested scopes add to the outer one). */
export function withLogScope<T>(fields: Record<string, string | undefined>, fn: () => T): T {
  if (!scoping()) return fn();
  const defined = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Record<
    string,
    string
  >;
  return scope.run({ ...scope.getStore(), ...defined }, fn);
}

/** The request id of the request or job being served here, if any. */
export function currentRequestId(): string | undefined {
  return scope.getStore()?.request_id;
}

/** The process-wide structured logger; every line inside a request or job carries its request_id. */
export function logger(): Logger {
  if (!root) root = createLogger();
  return root;
}

function createLogger(destination?: DestinationStream, level?: string): Logger {
  const options = {
    level: level ?? getConfig().logLevel,
    base: { pid: process.pid },
    mixin: () => scope.getStore() ?? {},
  };
  return destination ? pino(options, destination) : pino(options);
}

/** Tests: send the logs to this stream at this level from now on. */
export function redirectLogs(destination: DestinationStream, level = "debug"): void {
  root = createLogger(destination, level);
}
