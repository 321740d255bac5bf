import type { Db } from "../../db/knex.js";

export const ACCOUNT_KINDS = [
  "agent_available",
  "agent_held",
  "seller_payable",
  "platform_revenue",
  "chain_clearing",
  "bonds",
  "sandbox_faucet",
] as const;
export type AccountKind = (typeof ACCOUNT_KINDS)[number];
export type AgentAccountKind = Exclude<AccountKind, PlatformAccountKind>;
/** sandbox_faucet is the source of the sandbox's simulated tUSDC and exists in tUSDC only. */
export type PlatformAccountKind = "platform_revenue" | "chain_clearing" | "sandbox_faucet";

/**
 * Accounts that mirror units outside the ledger and so may go negative: chain clearing (money on chain)
 * and the sandbox faucet (simulated units created from nothing). A check constraint backs the rule.
 */
const NEGATIVE_ALLOWED: readonly AccountKind[] = ["chain_clearing", "sandbox_faucet"];

/** USDC is real money; tUSDC is the sandbox's simulated unit. They never meet in one transaction. */
export const CURRENCIES = ["USDC", "tUSDC"] as const;
export type Currency = (typeof CURRENCIES)[number];

export const TRANSACTION_KINDS = [
  "hold",
  "capture",
  "release",
  "deposit",
  "bond_post",
  "bond_release",
  "payout",
  "transfer",
  "faucet",
] as const;
export type TransactionKind = (typeof TRANSACTION_KINDS)[number];

export interface LedgerAccountRow {
  id: string;
  owner_agent_id: string | null;
  kind: AccountKind;
  currency: Currency;
  balance_micros: bigint;
  allow_negative: boolean;
  created_at: Date;
}

export interface LedgerTransactionRow {
  id: string;
  kind: TransactionKind;
  idempotency_key: string;
  reference_type: string | null;
  reference_id: string | null;
  resolves_transaction_id: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

export interface LedgerEntryRow {
  id: string;
  transaction_id: string;
  account_id: string;
  amount_micros: bigint;
  balance_before_micros: bigint;
  balance_after_micros: bigint;
  created_at: Date;
}

/** An entry with its account's kind, owner and currency, as a transaction's entries are read back. */
export interface LedgerEntryView extends LedgerEntryRow {
  kind: AccountKind;
  owner_agent_id: string | null;
  currency: Currency;
}

type Raw<T, K extends keyof T> = Omit<T, K> & { [P in K]: string };

function toAccount(row: Raw<LedgerAccountRow, "balance_micros">): LedgerAccountRow {
  return { ...row, balance_micros: BigInt(row.balance_micros) };
}

function toEntry<T extends LedgerEntryRow>(
  row: Raw<T, "amount_micros" | "balance_before_micros" | "balance_after_micros">,
): T {
  return {
    ...row,
    amount_micros: BigInt(row.amount_micros),
    balance_before_micros: BigInt(row.balance_before_micros),
    balance_after_micros: BigInt(row.balance_after_micros),
  } as T;
}

/**
 * The account of (owner, kind, currency), created on first use. Race-safe: concurrent creators insert
 * with ON CONFLICT DO NOTHING (either partial unique index) and then all read the one row. Under READ
 * COMMITTED the second read sees the winner's row once the insert has waited for it to commit.
 */
export async function getOrCreateAccount(
  q: Db,
  ownerAgentId: string | null,
  kind: AccountKind,
  currency: Currency,
): Promise<LedgerAccountRow> {
  const find = () =>
    q("ledger_accounts")
      .where({ kind, currency })
      .modify((query) => {
        if (ownerAgentId === null) query.whereNull("owner_agent_id");
        else query.where({ owner_agent_id: ownerAgentId });
      })
      .first();
  const found = await find();
  if (found) return toAccount(found);
  const [inserted] = await q("ledger_accounts")
    .insert({ owner_agent_id: ownerAgentId, kind, currency, allow_negative: NEGATIVE_ALLOWED.includes(kind) })
    .onConflict()
    .ignore()
    .returning("*");
  if (inserted) return toAccount(inserted);
  const existing = await find();
  if (!existing) throw new Error(`ledger account ${kind}/${currency} conflicted but is not visible`);
  return toAccount(existing);
}

/** Locks the accounts with SELECT … FOR UPDATE in id order (the one lock order: no deadlocks). */
export async function lockAccounts(q: Db, ids: string[]): Promise<LedgerAccountRow[]> {
  const rows = await q("ledger_accounts").whereIn("id", ids).orderBy("id").forUpdate().select("*");
  return rows.map(toAccount);
}

/** Inserts a transaction row, or returns undefined when its idempotency key is already recorded. */
export async function insertTransaction(
  q: Db,
  row: Pick<
    LedgerTransactionRow,
    "kind" | "idempotency_key" | "reference_type" | "reference_id" | "resolves_transaction_id" | "metadata"
  >,
): Promise<LedgerTransactionRow | undefined> {
  const [inserted] = await q("ledger_transactions")
    .insert({ ...row, metadata: JSON.stringify(row.metadata) })
    .onConflict("idempotency_key")
    .ignore()
    .returning("*");
  return inserted;
}

export async function findTransactionByKey(
  q: Db,
  idempotencyKey: string,
): Promise<LedgerTransactionRow | undefined> {
  return q<LedgerTransactionRow>("ledger_transactions").where({ idempotency_key: idempotencyKey }).first();
}

export interface NewEntry {
  account_id: string;
  amount_micros: bigint;
  balance_before_micros: bigint;
  balance_after_micros: bigint;
}

/**
 * Writes a transaction's entries and sets each touched account's balance to its last entry's
 * balance_after. The caller holds the accounts' row locks and computed the balances under them.
 */
export async function applyEntries(q: Db, transactionId: string, entries: NewEntry[]): Promise<void> {
  await q("ledger_entries").insert(
    entries.map((e) => ({
      transaction_id: transactionId,
      account_id: e.account_id,
      amount_micros: e.amount_micros.toString(),
      balance_before_micros: e.balance_before_micros.toString(),
      balance_after_micros: e.balance_after_micros.toString(),
    })),
  );
  const finalBalance = new Map<string, bigint>();
  for (const e of entries) finalBalance.set(e.account_id, e.balance_after_micros);
  for (const [id, balance] of finalBalance) {
    await q("ledger_accounts").where({ id }).update({ balance_micros: balance.toString() });
  }
}

/** Every account an agent owns in one currency. */
export async function agentAccounts(q: Db, agentId: string, currency: Currency): Promise<LedgerAccountRow[]> {
  const rows = await q("ledger_accounts").where({ owner_agent_id: agentId, currency }).select("*");
  return rows.map(toAccount);
}

/** Every account the given agents own, in every currency. */
export async function accountsOwnedBy(q: Db, agentIds: string[]): Promise<LedgerAccountRow[]> {
  const rows = await q("ledger_accounts").whereIn("owner_agent_id", agentIds).orderBy("id").select("*");
  return rows.map(toAccount);
}

/** A transaction's entries in write order, with each entry's account kind, owner and currency. */
export function transactionEntries(q: Db, transactionId: string): Promise<LedgerEntryView[]> {
  return entriesOfTransactions(q, [transactionId]);
}

/** The entries of many transactions in write order, with their accounts' kind, owner and currency. */
export async function entriesOfTransactions(q: Db, transactionIds: string[]): Promise<LedgerEntryView[]> {
  const rows = await q("ledger_entries as e")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .whereIn("e.transaction_id", transactionIds)
    .orderBy("e.id")
    .select("e.*", "a.kind", "a.owner_agent_id", "a.currency");
  return rows.map((r) => toEntry<LedgerEntryView>(r));
}

/** How many entries the given accounts have. */
export async function countEntries(q: Db, accountIds: string[]): Promise<number> {
  const [row] = await q("ledger_entries").whereIn("account_id", accountIds).count<{ count: string }[]>("*");
  return Number(row?.count ?? 0);
}

/** Σ amount of the given transactions' entries, per currency (zero for every currency, always). */
export async function sumEntriesByCurrency(q: Db, transactionIds: string[]): Promise<Map<Currency, bigint>> {
  const rows = await q("ledger_entries as e")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .whereIn("e.transaction_id", transactionIds)
    .groupBy("a.currency")
    .select("a.currency", q.raw("sum(e.amount_micros)::text as total"));
  return new Map(rows.map((r: { currency: Currency; total: string }) => [r.currency, BigInt(r.total)]));
}
