// Executions run in the request that submitted them, in a process that also hosts the executions worker
// (npm start's all-in-one process). The queue hop — add, a worker's fetch, its completion and the event
// the waiting request reads — is a dozen Redis round trips and the larger part of an execute's latency
// there; the run itself is the worker's: the same claim, attempts, limits and outcome transactions.
//
// Durability is the queue path's. The invocation commits running, with attempt 1 recorded, before any
// call; it has no outbox row, since no job is sent. If this process dies mid-run, the executions recovery
// sweep (recovery.ts, run by every executions process, so by this one when it restarts) finds the open
// invocation older than its grace with no job in the queue and sends one; a worker then finishes it as it
// would a dead worker's run — it waits out the live attempt's deadline, closes it as abandoned and never
// calls a provider that is not safe_to_retry twice. A run that throws here goes to the queue at once. A run
// still going when the sweep passes is sent as well; the worker finds the live attempt and waits until it
// has ended. So a process runs executions here only while that sweep is on (EXECUTIONS_RECOVERY_INTERVAL_MS
// above 0) (docs/architecture.md "Executions run where they are submitted").

import type { EarlyGate } from "./call-gate.js";
import type { SignedRequest } from "./provider-call.js";
import type { RunClaim } from "./store/invocations.js";

/**
 * What a request that claims a run here starts for the run's first candidate while the claim is being
 * written (openEarlyGate in run-invocation.ts): attempt 1's signed request and, for free unkeyed work,
 * the call gate (a transaction asks it once it has committed: see submission.ts). The run uses them for
 * attempt 1's call, which still starts only after the attempt is recorded.
 */
export interface EarlyStart extends EarlyGate {
  request?: Promise<SignedRequest>;
}

/**
 * Runs one invocation to its end; with a claim when the submission already made it (one round trip), and
 * the call gate it asked for the first candidate meanwhile, with attempt 1's request signed.
 */
export type Runner = (invocationId: string, claim?: RunClaim, early?: EarlyStart) => Promise<unknown>;

let runner: Runner | undefined;
let slots = 0;
let taken = 0;
const running = new Map<string, Promise<unknown>>();

/**
 * Lets requests of this process run their executions here, at most maxAtOnce at a time (beyond that they
 * go through the queue). Answers the drain for shutdown: no new runs, and the ones in flight finish.
 */
export function runExecutionsHere(run: Runner, maxAtOnce: number): { drain(): Promise<void> } {
  runner = run;
  slots = maxAtOnce;
  return {
    async drain() {
      if (runner === run) runner = undefined;
      await Promise.allSettled([...running.values()]);
    },
  };
}

/** Whether a request of this process is running this invocation (completions are offered to it). */
export function isRunningHere(invocationId: string): boolean {
  return running.has(invocationId);
}

/**
 * What happens once a run here ends: ran is true when it returned, false when it threw. Its answer is
 * the waiting request's: whether the invocation ended. It runs before the slot is given back, so at
 * shutdown it counts as part of the run.
 */
export type AfterRun = (ran: boolean, error?: unknown) => Promise<boolean>;

/** A slot taken before the invocation is inserted, so that the insert can claim the run (runs here). */
export interface RunSlot {
  /** Starts the run; the promise never rejects and answers AfterRun's answer. */
  start(
    invocationId: string,
    claim: RunClaim | undefined,
    after: AfterRun,
    early?: EarlyStart,
  ): Promise<boolean>;
  /** Gives the slot back unused (the insert failed or was not made). */
  release(): void;
}

/** A slot for a run here; undefined when this process does not run executions or every slot is taken. */
export function reserveRunHere(): RunSlot | undefined {
  const run = runner;
  if (!run || taken >= slots) return undefined;
  taken += 1;
  let used = false;
  const giveBack = () => {
    if (used) return;
    used = true;
    taken -= 1;
  };
  return {
    start(invocationId, claim, after, early) {
      const ended = run(invocationId, claim, early)
        .then(
          () => after(true),
          (error: unknown) => after(false, error),
        )
        .finally(() => {
          running.delete(invocationId);
          giveBack();
        });
      running.set(invocationId, ended);
      return ended;
    },
    release: giveBack,
  };
}
