import type { Queue } from "bullmq";
import type { Db } from "../../db/knex.js";
import { openInvocations, runSqlChecks, SQL_CHECKS, type Violation } from "./store.js";

// The invariant checker (docs/reliability.md "Invariants"): what must hold in any database of ours,
// whatever crashed, whatever was retried. `npm run check:invariants` runs it against DATABASE_URL and
// REDIS_URL; the chaos run and the tests call checkInvariants directly.

export type { Violation } from "./store.js";

/** Job states in which a job still owns its invocation: it will run (again) and end it. */
const LIVE_JOB_STATES = new Set(["waiting", "active", "delayed", "prioritized", "waiting-children"]);

export interface InvariantReport {
  checks: { name: string; promise: string; violations: number }[];
  violations: Violation[];
}

export const LIVE_JOB_CHECK = {
  name: "open_invocation_has_live_job",
  promise:
    "every accepted invocation is terminal, or owned by a live job (waiting, active, delayed) or by an outbox row the sweeper will send",
};

/**
 * The live-job check's default grace. A run in the submitting process (routing's runs-here) has neither
 * job nor outbox row until the executions recovery sweep sends one, 10–40 s after it started (its grace,
 * then its 30 s interval): younger open invocations may be such runs, still in flight.
 */
export const LIVE_JOB_GRACE_SECONDS = 60;

/** Every invariant's name and promise, for the docs and the command's listing. */
export function invariantList(): { name: string; promise: string }[] {
  return [...SQL_CHECKS.map(({ name, promise }) => ({ name, promise })), LIVE_JOB_CHECK];
}

/**
 * Open invocations that nothing will finish: no unsent outbox row and no live job in the executions
 * queue. Invocations younger than `graceSeconds` are skipped (their commit and enqueue may be in flight).
 */
async function invocationsWithoutJob(q: Db, executions: Queue, graceSeconds: number): Promise<Violation[]> {
  const violations: Violation[] = [];
  for (const open of await openInvocations(q, graceSeconds)) {
    if (open.unsent_outbox) continue;
    const job = await executions.getJob(open.id);
    const state = job ? await job.getState() : "missing";
    if (!LIVE_JOB_STATES.has(state))
      violations.push({
        check: LIVE_JOB_CHECK.name,
        subject: `invocation ${open.id}`,
        detail: `status ${open.status} but its job is ${state}`,
      });
  }
  return violations;
}

/**
 * Runs every invariant. Without a queue (no Redis to ask) the live-job check is left out and says so
 * in its promise; every other check reads PostgreSQL only.
 */
export async function checkInvariants(
  q: Db,
  options: { executions?: Queue; graceSeconds?: number } = {},
): Promise<InvariantReport> {
  const results = await runSqlChecks(q);
  if (options.executions)
    results.push({
      ...LIVE_JOB_CHECK,
      violations: await invocationsWithoutJob(
        q,
        options.executions,
        options.graceSeconds ?? LIVE_JOB_GRACE_SECONDS,
      ),
    });
  return {
    checks: results.map((r) => ({ name: r.name, promise: r.promise, violations: r.violations.length })),
    violations: results.flatMap((r) => r.violations),
  };
}
