import { db } from "../db/knex.js";
import { type Periodic, runPeriodically } from "../infra/periodic.js";
import { timeOrderedIdFloor } from "../kernel/ids.js";
import { logger } from "../log.js";
import { enqueue, getQueue } from "../queues.js";
import { type EdgeSettlement, failInvocation, type LastFailure } from "./run-invocation.js";
import { listSentOpenInvocations } from "./store/invocations.js";

// Open invocations no job will ever end. The executions worker fails an invocation from its "failed"
// handler when the queue gives up on its job (attempts spent, or stalled more than BullMQ allows); that
// handler runs after the job is already failed in Redis, so a worker killed in between left the invocation
// running forever, its hold never released (found by the chaos run, docs/reliability.md "Chaos"). The
// recovery sweep, run by every executions process, does what the handler would have done. It is also
// what finishes a run in the submitting process (runs-here.ts) whose process died: such a run has no
// outbox row and no job, so the sweep finds its job gone and sends one.

/** What a failed-for-good job leaves on its invocation: the same as the worker's "failed" handler. */
export const ABANDONED_BY_QUEUE: LastFailure = {
  code: "INTERNAL_ERROR",
  message: "the execution could not be completed",
};

/**
 * Open invocations younger than this are left alone: their worker's own handler is still in time, and
 * most runs in the submitting process have ended by then (one still going is sent harmlessly: the
 * worker waits out its live attempt).
 */
export const RECOVERY_GRACE_SECONDS = 10;
/** Open invocations one pass reads at most (each costs a Redis read of its job's state). */
const RECOVERY_BATCH = 100;

/**
 * The frequent pass reads only the invocations created in this window: their ids are time-ordered, so
 * the window is a range of the open invocations' index. Every pass reads that index, not the history
 * (migrations/20261201000100); the window keeps the frequent passes on recent work when a backlog of old
 * open invocations fills whole batches, so an orphan made now is found within the window's own passes.
 * An open invocation outlives the window only when it waited for approval or for a backlog, or when its
 * jobs were retried for that long; the full pass below finds those, and the invocations made before ids
 * were time-ordered (migrations/20261130000100), whose random ids no window holds.
 */
export const RECENT_WINDOW_SECONDS = 15 * 60;
/** The first pass of a process, and every this many after it, read every open invocation however old. */
export const FULL_PASS_EVERY = 20;

/**
 * Which open invocations one pass reads besides the grace: unless full, those created since; and, when
 * the pass before it of the same scope read a whole batch, those after where it ended.
 */
export interface SweepScope {
  createdSince?: Date;
  /** The last id the pass before read. */
  after?: string;
}

/** The scope of a process's `pass`-th sweep (0 is its first): full, or the recent window. */
export function sweepScope(pass: number, now: Date = new Date()): SweepScope {
  if (pass % FULL_PASS_EVERY === 0) return {};
  return { createdSince: new Date(now.getTime() - RECENT_WINDOW_SECONDS * 1000) };
}

/** What one pass did, and where the next of its scope goes on from (unset: it read the last of them). */
export interface SweepResult {
  failed: number;
  requeued: number;
  next?: string;
}

/**
 * Ends the open invocations whose executions job is failed or completed (failed, hold released, x402
 * payment voided, as the worker's "failed" handler does), and enqueues again the ones whose job is gone
 * although it was sent (the job id is the invocation id, so a job that exists is never doubled). Safe to
 * run in any number of processes at once: failing is conditional on the invocation still being open.
 * Without `createdSince` it reads every open invocation; at most `batch` of them, in id order (about
 * oldest first), after `scope.after`.
 */
export async function recoverOrphanedInvocations(
  edge: EdgeSettlement,
  scope: SweepScope = {},
  batch: number = RECOVERY_BATCH,
): Promise<SweepResult> {
  const queue = getQueue("executions");
  const done: SweepResult = { failed: 0, requeued: 0 };
  const floor = scope.createdSince && timeOrderedIdFloor(scope.createdSince);
  const ids = await listSentOpenInvocations(db(), RECOVERY_GRACE_SECONDS, batch, floor, scope.after);
  for (const id of ids) {
    const state = await queue.getJobState(id);
    if (state === "failed" || state === "completed") {
      if ((await failInvocation(id, ABANDONED_BY_QUEUE, edge)) === "failed") {
        done.failed += 1;
        logger().warn({ invocation_id: id, job_state: state }, "recovered an invocation its job left open");
      }
    } else if (state === "unknown") {
      await enqueue("executions", id, { invocation_id: id });
      done.requeued += 1;
      logger().warn({ invocation_id: id }, "enqueued again an invocation whose job was gone");
    }
  }
  // Ids, not creation times, mark the place: a JavaScript Date holds milliseconds, PostgreSQL's
  // timestamps microseconds, so a time read back would compare after the very row it came from.
  if (ids.length === batch) done.next = ids.at(-1);
  return done;
}

/**
 * The sweep's passes in one process, one call a pass: sweepScope decides each pass's scope, and each
 * scope goes on from where its previous pass ended while those passes read whole batches. Starting from
 * the oldest on every pass, a backlog of more than a batch of open invocations whose jobs are live (a
 * queue that is behind) was read again on every pass, and an orphan behind it waited until the backlog
 * shrank; now every open invocation is read within (open invocations / batch) passes of each scope.
 */
export function orphanSweep(
  edge: EdgeSettlement,
  batch: number = RECOVERY_BATCH,
): () => Promise<SweepResult> {
  let pass = 0;
  const cursors: { recent?: string; full?: string } = {};
  return async () => {
    const scope = sweepScope(pass++);
    const kind = scope.createdSince ? "recent" : "full";
    const result = await recoverOrphanedInvocations(edge, { ...scope, after: cursors[kind] }, batch);
    cursors[kind] = result.next;
    return result;
  };
}

/** Runs the sweep (orphanSweep) every `intervalMs` in this process, one pass at a time. */
export function scheduleOrphanRecovery(edge: EdgeSettlement, intervalMs: number): Periodic {
  const sweep = orphanSweep(edge);
  return runPeriodically(intervalMs, () =>
    sweep().then(
      () => {},
      (err) => logger().error({ err }, "executions recovery sweep failed"),
    ),
  );
}
