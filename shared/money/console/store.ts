import type { Db } from "../../db/knex.js";
import type { DepositStatus } from "../deposits/store/deposits.js";
import type { PayoutRow, PayoutStatus } from "../payouts/store.js";

// What operators read across money rows (docs/operations.md "Money console", "Metrics"): counts and
// totals for /metrics, and the payouts and deposits that failed or stopped moving.

export interface CountByState {
  state: string;
  count: number;
  amount_micros: string;
}

/** Payouts per status with the sum of their amounts. */
export async function payoutCountsByStatus(q: Db): Promise<CountByState[]> {
  return q("payouts")
    .groupBy("status")
    .select(
      "status as state",
      q.raw("count(*)::int as count"),
      q.raw("coalesce(sum(amount_micros), 0)::text as amount_micros"),
    );
}

/** Deposits per status with the sum of their amounts (unknown amounts count 0). */
export async function depositCountsByStatus(q: Db): Promise<CountByState[]> {
  return q("deposits")
    .groupBy("status")
    .select(
      "status as state",
      q.raw("count(*)::int as count"),
      q.raw("coalesce(sum(amount_micros), 0)::text as amount_micros"),
    );
}

export interface LedgerTotal {
  kind: string;
  currency: string;
  accounts: number;
  balance_micros: string;
}

/** The ledger's balances summed by account class (kind) and currency. */
export async function ledgerTotalsByKind(q: Db): Promise<LedgerTotal[]> {
  return q("ledger_accounts")
    .groupBy("kind", "currency")
    .orderBy(["kind", "currency"])
    .select(
      "kind",
      "currency",
      q.raw("count(*)::int as accounts"),
      q.raw("coalesce(sum(balance_micros), 0)::text as balance_micros"),
    );
}

const OPEN_PAYOUT: PayoutStatus[] = ["pending", "submitted"];
const OPEN_DEPOSIT: DepositStatus[] = ["pending", "confirming"];

/** Failed payouts, and open ones untouched for `stuckSeconds`, newest change first. */
export async function problemPayouts(q: Db, stuckSeconds: number, limit: number): Promise<PayoutRow[]> {
  return q<PayoutRow>("payouts")
    .where((w) =>
      w
        .where({ status: "failed" })
        .orWhere((o) =>
          o
            .whereIn("status", OPEN_PAYOUT)
            .andWhere("updated_at", "<", q.raw("now() - make_interval(secs => ?)", [stuckSeconds])),
        ),
    )
    .orderBy([
      { column: "updated_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit);
}

export interface DepositConsoleRow {
  id: string;
  agent_id: string;
  chain_id: number;
  tx_hash: string;
  status: DepositStatus;
  amount_micros: string | null;
  confirmations: number;
  confirmations_required: number;
  waiting_reason: string | null;
  rejected_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Rejected deposits, and open ones untouched for `stuckSeconds`, newest change first. */
export async function problemDeposits(
  q: Db,
  stuckSeconds: number,
  limit: number,
): Promise<DepositConsoleRow[]> {
  return q<DepositConsoleRow>("deposits")
    .where((w) =>
      w
        .where({ status: "rejected" })
        .orWhere((o) =>
          o
            .whereIn("status", OPEN_DEPOSIT)
            .andWhere("updated_at", "<", q.raw("now() - make_interval(secs => ?)", [stuckSeconds])),
        ),
    )
    .orderBy([
      { column: "updated_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .limit(limit)
    .select(
      "id",
      "agent_id",
      "chain_id",
      "tx_hash",
      "status",
      q.raw("amount_micros::text as amount_micros"),
      "confirmations",
      "confirmations_required",
      "waiting_reason",
      "rejected_reason",
      "created_at",
      "updated_at",
    );
}

const DEPOSIT_COLUMNS = [
  "id",
  "agent_id",
  "chain_id",
  "tx_hash",
  "status",
  "confirmations",
  "confirmations_required",
  "waiting_reason",
  "rejected_reason",
  "created_at",
  "updated_at",
];

/** One deposit as the console shows it. */
export async function findConsoleDeposit(q: Db, id: string): Promise<DepositConsoleRow | undefined> {
  return q<DepositConsoleRow>("deposits")
    .where({ id })
    .first(...DEPOSIT_COLUMNS, q.raw("amount_micros::text as amount_micros"));
}
