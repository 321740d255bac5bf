import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { type Periodic, runPeriodically } from "../infra/periodic.js";
import { logger } from "../log.js";
import { QUEUE_NAMES, type QueueName } from "../queue-names.js";
import { enqueue } from "../queues.js";
import { deleteSentOutbox, lockUnsentOutbox, markOutboxSent } from "./store.js";

const BATCH = 200;
const MARK_DELAY_MS = 20;

const pendingMarks = new Map<QueueName, string[]>();
let markTimer: NodeJS.Timeout | undefined;

async function flushMarks(): Promise<void> {
  markTimer = undefined;
  const batches = [...pendingMarks];
  pendingMarks.clear();
  for (const [queue, jobIds] of batches) {
    await markOutboxSent(db(), queue, jobIds).catch((err) =>
      logger().warn(
        { err, queue, count: jobIds.length },
        "outbox rows not marked sent; the sweeper re-sends them harmlessly",
      ),
    );
  }
}

/**
 * Records that a job reached the queue. Marks are batched (one UPDATE per queue every few ms) because
 * they only spare the sweeper work: a lost mark means a harmless second enqueue of the same job id.
 */
export function markJobSent(queue: QueueName, jobId: string): void {
  const ids = pendingMarks.get(queue);
  if (ids) ids.push(jobId);
  else pendingMarks.set(queue, [jobId]);
  markTimer ??= setTimeout(flushMarks, MARK_DELAY_MS);
}

/** Writes pending marks now (shutdown). */
export async function flushJobMarks(): Promise<void> {
  if (markTimer) clearTimeout(markTimer);
  await flushMarks();
}

/**
 * Re-enqueues outbox rows the API committed but never managed to send (Redis down, process killed
 * between commit and enqueue). Rows are locked with SKIP LOCKED, so several API processes may sweep at
 * once; job ids are row ids, so a job sent twice is added once. Returns how many rows were sent.
 */
export async function sweepOutbox(): Promise<number> {
  return db().transaction(async (trx) => {
    const rows = await lockUnsentOutbox(trx, QUEUE_NAMES, getConfig().outboxStaleAfterMs, BATCH);
    for (const row of rows) await enqueue(row.queue as QueueName, row.job_id, row.payload as never);
    for (const queue of new Set(rows.map((r) => r.queue))) {
      await markOutboxSent(
        trx,
        queue,
        rows.filter((r) => r.queue === queue).map((r) => r.job_id),
      );
    }
    return rows.length;
  });
}

/** A periodic clean-up that needs no queue, run by the sweeper every hundredth pass. */
export type Housekeeping = () => Promise<unknown>;

/**
 * Deletes sent outbox rows older than a day, then runs the other contexts' housekeeping (expired
 * idempotency keys, unpaid old quotes). Those are handed in by the composition root (api/housekeeping.ts)
 * because the outbox sits below every context that uses it (docs/architecture.md).
 */
export async function purgeExpired(housekeeping: Housekeeping[]): Promise<void> {
  await deleteSentOutbox(db(), 24);
  for (const task of housekeeping) await task();
}

/** Runs the sweep on OUTBOX_SWEEP_INTERVAL_MS, one pass at a time, in the web process. */
export function startSweeper(housekeeping: Housekeeping[]): Periodic {
  let passes = 0;
  return runPeriodically(getConfig().outboxSweepIntervalMs, async () => {
    try {
      const sent = await sweepOutbox();
      if (sent > 0) logger().info({ sent }, "outbox sweeper re-sent jobs");
      if (passes++ % 100 === 0) await purgeExpired(housekeeping);
    } catch (err) {
      logger().warn({ err }, "outbox sweep failed; will try again");
    }
  });
}
