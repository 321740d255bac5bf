import type { Queue } from "bullmq";
import type { Knex } from "knex";
import { type Address, parseAbiItem } from "viem";
import { ERC20_ABI } from "../../shared/chain/client.js";
import type { LocalChain } from "../../shared/chain/local-chain.js";
import { checkInvariants, type Violation } from "../../shared/system/index.js";
import type { OpRecord, World } from "./load.js";

// After the faults: wait until nothing is in flight, then count what the issue asks for — lost operations,
// double charges, double payouts — and run the invariant checker over the whole database.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What is still open, by kind (empty when the system has drained). */
export async function openWork(db: Knex): Promise<Record<string, number>> {
  const count = async (table: string, column: string, states: string[]) =>
    Number((await db(table).whereIn(column, states).count({ n: "*" }))[0]!.n);
  const open: Record<string, number> = {
    invocations: await count("invocations", "status", ["queued", "running"]),
    deposits: await count("deposits", "status", ["pending", "confirming"]),
    payouts: await count("payouts", "status", ["pending", "submitted"]),
    x402_payments: await count("x402_payments", "status", ["authorized", "settling", "submitted"]),
    outbox: Number((await db("job_outbox").whereNull("enqueued_at").count({ n: "*" }))[0]!.n),
  };
  return Object.fromEntries(Object.entries(open).filter(([, n]) => n > 0));
}

/** Polls until nothing is open (twice in a row, a sweep apart), or the time runs out; returns what stayed open. */
export async function drain(
  db: Knex,
  timeoutMs: number,
  log: (m: string) => void,
): Promise<Record<string, number>> {
  const deadline = Date.now() + timeoutMs;
  let quietRounds = 0;
  let open: Record<string, number> = {};
  let lastLog = 0;
  while (Date.now() < deadline) {
    try {
      open = await openWork(db);
    } catch (error) {
      open = { unreadable: 1 };
      log(`drain: database not readable yet (${String(error)})`);
    }
    quietRounds = Object.keys(open).length === 0 ? quietRounds + 1 : 0;
    // Quiet across a few payout sweeps: a payable balance left by the last captures is swept and settled.
    if (quietRounds >= 6) return {};
    if (Date.now() - lastLog > 5000) {
      log(`drain: open ${JSON.stringify(open)}`);
      lastLog = Date.now();
    }
    await sleep(500);
  }
  return open;
}

export interface Findings {
  lost: { kind: string; key: string; detail: string }[];
  doubleCharges: { subject: string; detail: string }[];
  doublePayouts: { subject: string; detail: string }[];
  violations: Violation[];
}

const TERMINAL_INVOCATION = ["succeeded", "failed"];
const TERMINAL_DEPOSIT = ["credited", "rejected"];
const FINAL_X402 = ["settled", "voided", "settlement_failed"];

/** Fills each record's final state and lists the accepted operations that did not end. */
export async function findLost(db: Knex, records: OpRecord[]): Promise<Findings["lost"]> {
  const lost: Findings["lost"] = [];
  const invocationIds = records.filter((r) => r.subject && r.kind !== "deposit").map((r) => r.subject!);
  const depositIds = records.filter((r) => r.subject && r.kind === "deposit").map((r) => r.subject!);
  const invocations = new Map<string, string>();
  for (const row of await db("invocations").whereIn("id", invocationIds).select("id", "status"))
    invocations.set(row.id, row.status);
  const payments = new Map<string, string>();
  for (const row of await db("x402_payments")
    .whereIn("invocation_id", invocationIds)
    .select("invocation_id", "status"))
    payments.set(row.invocation_id, row.status);
  const deposits = new Map<string, string>();
  for (const row of await db("deposits").whereIn("id", depositIds).select("id", "status"))
    deposits.set(row.id, row.status);
  // Payouts are the platform's own operations: one still open after the drain is lost too.
  for (const p of await db("payouts")
    .whereIn("status", ["pending", "submitted"])
    .select("id", "status", "waiting_reason"))
    lost.push({
      kind: "payout",
      key: p.id,
      detail: `payout ${p.status} (${p.waiting_reason ?? "no reason"})`,
    });
  for (const r of records) {
    if (r.answer === "unanswered") {
      lost.push({
        kind: r.kind,
        key: r.key,
        detail: `no outcome after ${r.attempts} attempts (answers: ${formatSeen(r.seen)})`,
      });
      continue;
    }
    if (r.answer !== "accepted") continue;
    if (r.kind === "deposit") {
      r.final = deposits.get(r.subject!) ?? "missing";
      if (!TERMINAL_DEPOSIT.includes(r.final))
        lost.push({ kind: r.kind, key: r.key, detail: `deposit ${r.subject} ${r.final}` });
      continue;
    }
    const status = invocations.get(r.subject!) ?? "missing";
    r.final = status;
    if (!TERMINAL_INVOCATION.includes(status)) {
      lost.push({ kind: r.kind, key: r.key, detail: `invocation ${r.subject} ${status}` });
      continue;
    }
    if (r.kind === "x402_invoke") {
      const payment = payments.get(r.subject!) ?? "missing";
      r.final = `${status}/${payment}`;
      if (!FINAL_X402.includes(payment))
        lost.push({ kind: r.kind, key: r.key, detail: `x402 payment of ${r.subject} ${payment}` });
    }
  }
  return lost;
}

/** A hold captured twice, an invocation with two receipts, a buyer debited more than its receipts, an x402 payer charged on chain more than its settled payments. */
export async function findDoubleCharges(
  db: Knex,
  chain: LocalChain,
  world: World,
  x402StartMicros: bigint,
): Promise<Findings["doubleCharges"]> {
  const found: Findings["doubleCharges"] = [];
  const twice = await db("ledger_transactions")
    .where({ kind: "capture" })
    .whereNotNull("resolves_transaction_id")
    .groupBy("resolves_transaction_id")
    .havingRaw("count(*) > 1")
    .select("resolves_transaction_id", db.raw("count(*)::int as n"));
  for (const row of twice)
    found.push({ subject: `hold ${row.resolves_transaction_id}`, detail: `captured ${row.n} times` });
  const byReference = await db("ledger_transactions")
    .where({ kind: "capture" })
    .whereNotNull("reference_id")
    .groupBy("reference_type", "reference_id")
    .havingRaw("count(*) > 1")
    .select("reference_type", "reference_id", db.raw("count(*)::int as n"));
  for (const row of byReference)
    found.push({ subject: `${row.reference_type} ${row.reference_id}`, detail: `${row.n} captures` });
  const receipts = await db("receipts")
    .groupBy("invocation_id")
    .havingRaw("count(*) > 1")
    .select("invocation_id", db.raw("count(*)::int as n"));
  for (const row of receipts)
    found.push({ subject: `invocation ${row.invocation_id}`, detail: `${row.n} receipts` });
  for (const buyer of world.buyers) {
    const credited = BigInt(
      (
        await db("deposits")
          .where({ agent_id: buyer.agentId, status: "credited" })
          .sum({ s: "amount_micros" })
      )[0]!.s ?? 0,
    );
    const balance = BigInt(
      (
        await db("ledger_accounts")
          .where({ owner_agent_id: buyer.agentId, currency: "USDC" })
          .whereIn("kind", ["agent_available", "agent_held"])
          .sum({ s: "balance_micros" })
      )[0]!.s ?? 0,
    );
    const charged = BigInt(
      (
        await db("receipts").where({ agent_id: buyer.agentId, currency: "USDC" }).sum({ s: "amount_micros" })
      )[0]!.s ?? 0,
    );
    if (credited - balance !== charged)
      found.push({
        subject: `buyer ${buyer.agentId}`,
        detail: `debited ${credited - balance} µUSDC, receipts total ${charged}`,
      });
  }
  for (const payer of world.x402Payers) {
    const onChain = await balanceOf(chain, payer.address);
    const settled = BigInt(
      (
        await db("x402_payments")
          .whereRaw("lower(payer) = ?", [payer.address.toLowerCase()])
          .where({ status: "settled" })
          .sum({ s: "amount_micros" })
      )[0]!.s ?? 0,
    );
    if (x402StartMicros - onChain !== settled)
      found.push({
        subject: `x402 payer ${payer.address}`,
        detail: `paid ${x402StartMicros - onChain} µUSDC on chain, settled payments total ${settled}`,
      });
  }
  return found;
}

/** Each seller wallet received on chain exactly its confirmed payouts, one transfer per payout. */
export async function findDoublePayouts(
  db: Knex,
  chain: LocalChain,
  world: World,
  platform: Address,
): Promise<Findings["doublePayouts"]> {
  const found: Findings["doublePayouts"] = [];
  for (const seller of world.sellers) {
    // A payout whose transfer was signed may be on chain; the chain must show no more than those. A payout
    // still open after a drain that ran out of time is reported as lost, not here.
    const payouts: { status: string; amount_micros: string; signed: boolean }[] = await db("payouts as p")
      .leftJoin("chain_transactions as t", (j) =>
        j.on("t.subject_id", "=", db.raw("p.id::text")).andOn("t.purpose", "=", db.raw("'payout'")),
      )
      .where("p.seller_id", seller.agentId)
      .select("p.status", "p.amount_micros", db.raw("t.id is not null as signed"));
    const sum = (rows: typeof payouts) => rows.reduce((s, p) => s + BigInt(p.amount_micros), 0n);
    const signed = payouts.filter((p) => p.signed);
    const confirmed = payouts.filter((p) => p.status === "confirmed");
    const open = payouts.some((p) => p.status === "pending" || p.status === "submitted");
    const received = await balanceOf(chain, seller.wallet);
    if (received > sum(signed) || (!open && received !== sum(confirmed)))
      found.push({
        subject: `seller ${seller.agentId}`,
        detail: `received ${received} µUSDC on chain; confirmed payouts total ${sum(confirmed)}, signed ${sum(signed)}`,
      });
    const transfers = await chain.publicClient.getLogs({
      address: chain.tokenAddress,
      event: parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)"),
      args: { from: platform, to: seller.wallet },
      fromBlock: 0n,
    });
    if (transfers.length > signed.length)
      found.push({
        subject: `seller ${seller.agentId}`,
        detail: `${transfers.length} transfers on chain for ${signed.length} signed payouts`,
      });
  }
  const twice = await db("chain_transactions")
    .where({ purpose: "payout" })
    .groupBy("subject_id")
    .havingRaw("count(*) > 1")
    .select("subject_id", db.raw("count(*)::int as n"));
  for (const row of twice)
    found.push({ subject: `payout ${row.subject_id}`, detail: `${row.n} chain transactions` });
  return found;
}

export async function runInvariants(db: Knex, executions: Queue): Promise<Violation[]> {
  const report = await checkInvariants(db, { executions, graceSeconds: 0 });
  return report.violations;
}

export function balanceOf(chain: LocalChain, address: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: ERC20_ABI,
    functionName: "balanceOf",
    args: [address],
  });
}

/** An unanswered operation's answers, most frequent first: "503 TEMPORARILY_UNAVAILABLE/settlement_rpc_unreachable ×41, no answer ×3". */
export function formatSeen(seen: Record<string, number> | undefined): string {
  const entries = Object.entries(seen ?? {}).sort(([, a], [, b]) => b - a);
  return entries.length ? entries.map(([label, n]) => `${label} ×${n}`).join(", ") : "none";
}
