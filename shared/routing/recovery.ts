import { db } from "../db/knex.js";
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
const BATCH = 100;

/**
 * Ends the open invocations whose executions job is failed or completed (failed, hold released, x402
 * payment voided, as the worker's "failed" handler does), and enqueues again the ones whose job is gone
 * although it was sent (the job id is the invocation id, so a job that exists is never doubled). Safe to
 * run in any number of processes at once: failing is conditional on the invocation still being open.
 */
export async function recoverOrphanedInvocations(
  edge: EdgeSettlement,
  olderThanSeconds = RECOVERY_GRACE_SECONDS,
): Promise<{ failed: number; requeued: number }> {
  const queue = getQueue("executions");
  const done = { failed: 0, requeued: 0 };
  for (const id of await listSentOpenInvocations(db(), olderThanSeconds, BATCH)) {
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
  return done;
}
