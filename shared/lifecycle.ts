import { getConfig } from "./config.js";
import { logger } from "./log.js";

/**
 * Shutdown runs in phases so that nothing closes under something still using it: first, in the
 * all-in-one process, the work that calls this process's own HTTP server (its workers and the runs in
 * requests reach first-party tools such as echo there: closed first, they would meet a refused
 * connection and count it against the tool's circuit); then stop taking work (HTTP server drains,
 * workers finish active jobs), then background loops, then clients (queues, outbound HTTP), then the
 * database pool, and last the embedded PostgreSQL and Redis of `npm start`.
 */
export type ShutdownPhase = "hosted work" | "ingress" | "background" | "clients" | "database" | "embedded";
const PHASES: ShutdownPhase[] = ["hosted work", "ingress", "background", "clients", "database", "embedded"];

const closers = new Map<string, { phase: ShutdownPhase; close: () => Promise<unknown> }>();
let stopping: Promise<void> | undefined;

/** Registers something to close on shutdown; a second registration under the same name is ignored. */
export function onShutdown(name: string, phase: ShutdownPhase, close: () => Promise<unknown>): void {
  if (!closers.has(name)) closers.set(name, { phase, close });
}

/** True once a shutdown has begun: connection errors from then on are expected, not news. */
export function isStopping(): boolean {
  return stopping !== undefined;
}

/**
 * Closes everything registered, phase by phase, bounded by SHUTDOWN_GRACE_MS. A second call (another
 * signal, a failed start racing a signal) waits for the same shutdown instead of starting another.
 */
export function shutdown(reason: string): Promise<void> {
  stopping ??= closeAll(reason);
  return stopping;
}

async function closeAll(reason: string): Promise<void> {
  if (closers.size === 0) return;
  logger().info({ reason }, "shutting down");
  const graceMs = getConfig().shutdownGraceMs;
  const timer = setTimeout(() => {
    logger().error({ graceMs }, "shutdown grace period over; exiting");
    process.exit(1);
  }, graceMs);
  timer.unref();
  for (const phase of PHASES) {
    const due = [...closers].filter(([, c]) => c.phase === phase);
    await Promise.all(
      due.map(async ([name, { close }]) => {
        try {
          await close();
        } catch (err) {
          logger().warn({ err, name }, "error while closing");
        }
      }),
    );
  }
  clearTimeout(timer);
}

/**
 * SIGTERM and SIGINT shut down gracefully, then exit 0. A repeated signal (npm and a terminal may both
 * deliver one) is absorbed rather than killing the process halfway through its shutdown.
 */
export function handleSignals(): void {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      shutdown(signal).then(() => process.exit(0));
    });
  }
}
