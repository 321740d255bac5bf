import { recordAudit } from "../../audit/index.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { type Periodic, runPeriodically } from "../../infra/periodic.js";
import { logger } from "../../log.js";
import { retryTransient } from "../../money/index.js";
import { lockExpiredApprovals, markApprovalExpired } from "../store/approvals.js";
import { releaseHeldPurchase } from "./approvals.js";

const BATCH = 100;

/**
 * Releases purchases whose approval nobody decided before expires_at: the approval becomes expired, the
 * invocation fails with POLICY_BLOCKED, the hold is released with refund evidence and the daily
 * reservation returned — all in one transaction per batch. Rows are locked with SKIP LOCKED, so every
 * web process may sweep at once, and a decision racing the sweep finds the row no longer pending.
 * Returns how many expired.
 */
export async function expireDueApprovals(): Promise<number> {
  return retryTransient(() =>
    db().transaction(async (trx) => {
      const due = await lockExpiredApprovals(trx, BATCH);
      for (const approval of due) {
        await markApprovalExpired(trx, approval.id);
        await releaseHeldPurchase(trx, approval.invocation_id, {
          code: "POLICY_BLOCKED",
          message: "no supervisor decided before the approval expired",
        });
        await recordAudit(trx, {
          actorAgentId: null,
          action: "approval.expired",
          subjectType: "approval",
          subjectId: approval.id,
          data: {
            invocation_id: approval.invocation_id,
            amount_micros: approval.amount_micros,
            expires_at: approval.expires_at.toISOString(),
          },
        });
      }
      return due.length;
    }),
  );
}

/** Runs the expiry sweep every APPROVAL_SWEEP_INTERVAL_MS in the web process, one pass at a time. */
export function startApprovalExpiry(): Periodic {
  return runPeriodically(getConfig().approvalSweepIntervalMs, async () => {
    try {
      const expired = await expireDueApprovals();
      if (expired > 0) logger().info({ expired }, "released purchases whose approval expired");
    } catch (err) {
      logger().warn({ err }, "approval expiry sweep failed; will try again");
    }
  });
}
