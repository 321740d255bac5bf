import type { Db } from "../../db/knex.js";
import type { X402PaymentStatus } from "./payments.js";

// What operators read about x402 settlements (docs/operations.md "Money console", "Metrics").

export interface SettlementConsoleRow {
  id: string;
  invocation_id: string;
  listing_id: string;
  seller_agent_id: string | null;
  protocol: string;
  network: string;
  amount_micros: string;
  payer: string;
  status: X402PaymentStatus;
  tx_hash: string | null;
  block_number: string | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = [
  "id",
  "invocation_id",
  "listing_id",
  "seller_agent_id",
  "protocol",
  "network",
  "amount_micros",
  "payer",
  "status",
  "tx_hash",
  "block_number",
  "failure_reason",
  "created_at",
  "updated_at",
];

const OPEN: X402PaymentStatus[] = ["settling", "submitted"];

/** Failed settlements, and open (settling, submitted) ones untouched for `stuckSeconds`, newest change first. */
export async function problemSettlements(
  q: Db,
  stuckSeconds: number,
  limit: number,
): Promise<SettlementConsoleRow[]> {
  return q<SettlementConsoleRow>("x402_payments")
    .where((w) =>
      w
        .where({ status: "settlement_failed" })
        .orWhere((o) =>
          o
            .whereIn("status", OPEN)
            .andWhere("updated_at", "<", q.raw("now() - make_interval(secs => ?)", [stuckSeconds])),
        ),
    )
    .orderBy([
      { column: "updated_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit)
    .select(COLUMNS);
}

export async function findConsoleSettlement(q: Db, id: string): Promise<SettlementConsoleRow | undefined> {
  return q<SettlementConsoleRow>("x402_payments").where({ id }).first(COLUMNS);
}

/** x402 payments per status. */
export async function settlementCountsByStatus(q: Db): Promise<{ state: string; count: number }[]> {
  return q("x402_payments").groupBy("status").select("status as state", q.raw("count(*)::int as count"));
}

/** Seconds since the oldest open settlement's call succeeded (0 when none is open): the settlement lag. */
export async function oldestOpenSettlementSeconds(q: Db): Promise<number> {
  const row = await q("x402_payments")
    .whereIn("status", OPEN)
    .first(q.raw("coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as seconds"));
  return Number((row as { seconds?: number } | undefined)?.seconds ?? 0);
}
