import { Gauge } from "prom-client";
import { db } from "../db/knex.js";
import { logger } from "../log.js";
import { depositCountsByStatus, ledgerTotalsByKind, payoutCountsByStatus } from "../money/index.js";
import { addCollector, metricsText, registry } from "../observability/metrics.js";
import { circuitStateCounts } from "../routing/index.js";
import { oldestOpenSettlementSeconds, settlementCountsByStatus } from "../x402/index.js";

// The gauges that read PostgreSQL and the breaker keys (docs/operations.md "Metrics"). Registered once
// in the process that serves them (the web process's /metrics), computed on scrape from a few grouped
// queries; each query's SQL lives in its context's store. Label values are statuses, account kinds,
// currencies and breaker states: bounded sets.

const payouts = new Gauge({
  name: "agentmarket_payouts",
  help: "Payouts by status",
  labelNames: ["status"] as const,
  registers: [registry],
});
const payoutAmounts = new Gauge({
  name: "agentmarket_payouts_amount_usdc",
  help: "Sum of payout amounts by status, in USDC",
  labelNames: ["status"] as const,
  registers: [registry],
});
const deposits = new Gauge({
  name: "agentmarket_deposits",
  help: "Deposits by status",
  labelNames: ["status"] as const,
  registers: [registry],
});
const settlements = new Gauge({
  name: "agentmarket_x402_settlements",
  help: "x402 payments by settlement status",
  labelNames: ["status"] as const,
  registers: [registry],
});
const settlementLag = new Gauge({
  name: "agentmarket_settlement_lag_seconds",
  help: "Age of the oldest x402 payment not yet settled on chain (settling or submitted); 0 when none",
  registers: [registry],
});
const ledgerBalances = new Gauge({
  name: "agentmarket_ledger_balance",
  help: "Ledger balances summed by account class (kind) and currency, in whole units (USDC, tUSDC)",
  labelNames: ["kind", "currency"] as const,
  registers: [registry],
});
const ledgerAccounts = new Gauge({
  name: "agentmarket_ledger_accounts",
  help: "Ledger accounts by class (kind) and currency",
  labelNames: ["kind", "currency"] as const,
  registers: [registry],
});
const breakers = new Gauge({
  name: "agentmarket_circuit_breakers",
  help: "Listings' circuit breakers by state (closed counts only circuits with recent failures)",
  labelNames: ["state"] as const,
  registers: [registry],
});

const micros = (s: string) => Number(BigInt(s)) / 1_000_000;

async function collectMoney(): Promise<void> {
  const q = db();
  const [p, d, s, lag, ledger] = await Promise.all([
    payoutCountsByStatus(q),
    depositCountsByStatus(q),
    settlementCountsByStatus(q),
    oldestOpenSettlementSeconds(q),
    ledgerTotalsByKind(q),
  ]);
  payouts.reset();
  payoutAmounts.reset();
  for (const status of ["pending", "submitted", "confirmed", "failed"]) {
    const row = p.find((r) => r.state === status);
    payouts.set({ status }, row?.count ?? 0);
    payoutAmounts.set({ status }, row ? micros(row.amount_micros) : 0);
  }
  deposits.reset();
  for (const row of d) deposits.set({ status: row.state }, row.count);
  settlements.reset();
  for (const row of s) settlements.set({ status: row.state }, row.count);
  settlementLag.set(lag);
  ledgerBalances.reset();
  ledgerAccounts.reset();
  for (const row of ledger) {
    ledgerBalances.set({ kind: row.kind, currency: row.currency }, micros(row.balance_micros));
    ledgerAccounts.set({ kind: row.kind, currency: row.currency }, row.accounts);
  }
}

async function collectBreakers(): Promise<void> {
  const counts = await circuitStateCounts();
  for (const [state, n] of Object.entries(counts)) breakers.set({ state }, n);
}

function logged(name: string, collect: () => Promise<void>) {
  return () =>
    collect().catch((err) => {
      logger().warn({ err, collector: name }, "a metrics source failed; its gauges keep their last values");
      throw err;
    });
}

const money = logged("money", collectMoney);
const circuits = logged("circuit breakers", collectBreakers);

/** The web process's /metrics text: every metric of this process plus the money and breaker gauges. */
export async function serviceMetrics(): Promise<string> {
  addCollector(money);
  addCollector(circuits);
  return metricsText();
}
