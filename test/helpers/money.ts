import { randomBytes } from "node:crypto";
import { db } from "../../shared/db/knex.js";
import { parseUsdc } from "../../shared/kernel/money.js";
import { type AgentMovement, creditDeposit } from "../../shared/money/ledger/flows.js";
import type { HeldFunds } from "../../shared/money/ledger/ledger.js";
import { buildAgent, type TestAgent } from "./factories.js";

/** USDC (a number) in micro-USDC. */
export const usdc = (n: number): bigint => parseUsdc(n, "/test");

/** What the hold that holdFunds(hold) posted holds, as its caller's own records say it. */
export function heldBy(hold: AgentMovement): HeldFunds {
  return {
    agentId: hold.agentId,
    currency: hold.currency,
    amountMicros: hold.amountMicros,
    reference: hold.reference,
  };
}

/** The hold that holdFunds(hold) posted, named as a capture or release names it: its key, what it holds. */
export function holdOf(hold: AgentMovement): { holdKey: string; expected: HeldFunds } {
  return { holdKey: hold.idempotencyKey, expected: heldBy(hold) };
}

/** Credits an agent's available USDC as a deposit would (without the chain), under a fresh key. */
export async function fundAgent(agentId: string, amountMicros: bigint): Promise<void> {
  await creditDeposit({
    agentId,
    currency: "USDC",
    amountMicros,
    reference: { type: "test", id: agentId },
    idempotencyKey: `test:fund:${randomBytes(8).toString("hex")}`,
  });
}

/** A new buyer (or seller) holding `amount` USDC available. */
export async function fundedAgent(
  amount: number,
  intent: "buyer" | "seller" | "both" = "buyer",
): Promise<TestAgent> {
  const agent = await buildAgent(intent);
  await fundAgent(agent.agentId, usdc(amount));
  return agent;
}

/** Every row of each table: for "refused, and nothing was written" checks (in a database of one's own). */
export async function rowCounts(tables: readonly string[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const t of tables) counts[t] = Number((await db()(t).count({ n: "*" }))[0]!.n);
  return counts;
}

/** The tables a paid call may write. */
export const MONEY_TABLES = [
  "invocations",
  "invocation_attempts",
  "receipts",
  "job_outbox",
  "idempotency_keys",
  "ledger_transactions",
  "ledger_entries",
  "payment_evidence",
  "api_key_spend_days",
  "approvals",
] as const;
