import { recordAudit } from "../audit/index.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { formatUsdc } from "../kernel/money.js";
import { evidenceView, listEvidence, redriveJob } from "../money/index.js";
import { findConsoleSettlement, problemSettlements, type SettlementConsoleRow } from "./store/console.js";

// The money console's x402 settlements (docs/operations.md "Money console"): failed or stuck ones with
// their evidence, and the operator's re-check. A re-check only sends the settlement's job again (job id =
// payment id): the settlement itself is keyed by the payment id end to end (one chain transaction per
// payment, one ledger posting ledger:x402:<id>), so a re-check, or many at once, cannot settle twice.

function settlementView(s: SettlementConsoleRow) {
  return {
    settlement_id: s.id,
    invocation_id: s.invocation_id,
    listing_id: s.listing_id,
    seller_agent_id: s.seller_agent_id,
    protocol: s.protocol,
    network: s.network,
    amount_usdc: formatUsdc(BigInt(s.amount_micros)),
    payer: s.payer,
    status: s.status,
    tx_hash: s.tx_hash,
    block_number: s.block_number === null ? null : Number(s.block_number),
    failure_reason: s.failure_reason,
    created_at: s.created_at.toISOString(),
    updated_at: s.updated_at.toISOString(),
  };
}

/** Failed settlements and open ones untouched for `stuckSeconds`, each with its evidence rows. */
export async function failedOrStuckSettlements(stuckSeconds: number, limit: number) {
  const rows = await problemSettlements(db(), stuckSeconds, limit);
  return Promise.all(
    rows.map(async (s) => ({
      ...settlementView(s),
      evidence: (await listEvidence(db(), "x402_payment", s.id)).map(evidenceView),
    })),
  );
}

/** An operator's re-check of an open settlement: its job is sent again. Audited; 409 when final. */
export async function recheckSettlement(settlementId: string, requestId: string) {
  const s = await findConsoleSettlement(db(), settlementId);
  if (!s) throw new AppError("NOT_FOUND", `no x402 settlement ${settlementId}`);
  if (s.status !== "settling" && s.status !== "submitted") {
    throw new AppError("CONFLICT", `this settlement is ${s.status}: nothing to re-check`, {
      status: s.status,
    });
  }
  const job = await redriveJob("settlement-confirmations", s.id, { settlement_id: s.id });
  await recordAudit(db(), {
    action: "x402_settlement.rechecked",
    subjectType: "x402_payment",
    subjectId: s.id,
    requestId,
    data: { status: s.status, job, by: "operator" },
  });
  return { ...settlementView(s), job };
}
