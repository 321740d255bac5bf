// A sweep run on a timer, one pass at a time: what the outbox sweeper, the approval expiry and the
// executions and settlement recovery sweeps each need. A pass that outlasts the interval is not doubled
// by the next tick, which is skipped; a pass's errors are its own to report (each sweep logs them in its
// own words and at its own level), so `pass` should not reject.

export interface Periodic {
  /** No pass starts after this; resolves once a pass under way has ended. */
  stop(): Promise<void>;
}

/** Runs `pass` every `intervalMs` on an unref'd timer (it never keeps the process alive on its own). */
export function runPeriodically(intervalMs: number, pass: () => Promise<void>): Periodic {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (running) return;
    running = pass().finally(() => {
      running = undefined;
    });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
