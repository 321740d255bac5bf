import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import { refuseUnless } from "../../db/refusals.js";

export type QuoteRail = "x402" | "tumbler" | "ledger";

export interface QuoteRow {
  id: string;
  rail: QuoteRail;
  listing_id: string;
  task: string;
  agent_id: string | null;
  amount_micros: string;
  currency: "USDC" | "tUSDC";
  network: string | null;
  asset: string | null;
  pay_to: string | null;
  expires_at: Date;
  used_at: Date | null;
  invocation_id: string | null;
  created_at: Date;
}

export type NewQuote = Pick<QuoteRow, "rail" | "listing_id" | "task" | "currency"> & {
  agent_id?: string | null;
  amount_micros: bigint;
  network?: string | null;
  asset?: string | null;
  pay_to?: string | null;
  ttlSeconds: number;
};

export async function insertQuote(q: Db, quote: NewQuote): Promise<QuoteRow> {
  const { ttlSeconds, amount_micros, ...rest } = quote;
  const [row] = await q<QuoteRow>("quotes")
    .insert({
      ...rest,
      amount_micros: amount_micros.toString(),
      expires_at: q.raw("now() + make_interval(secs => ?)", [ttlSeconds]),
    } as never)
    .returning("*");
  return row!;
}

export async function findQuote(q: Db, id: string): Promise<QuoteRow | undefined> {
  return q<QuoteRow>("quotes").where({ id }).first();
}

/**
 * Marks a quote paid by an invocation, once: false when it was already used or has expired. Run it in
 * the transaction that creates the invocation, so a quote can never pay for two.
 */
export async function useQuote(q: Db, id: string, invocationId: string): Promise<boolean> {
  return (await preparedRaw(q, USE_QUOTE, [invocationId, id])).rows.length === 1;
}

/** The quote's use, once, while it is unused and unexpired (bindings: the invocation, the quote). */
const USE_QUOTE = `update quotes set used_at = now(), invocation_id = ?
        where id = ? and used_at is null and expires_at > now()
       returning id`;

/** Why useQuoteStrictly failed (its refuse_unless reason): the quote was used, or has expired. */
export const QUOTE_NOT_USABLE = "routing: the quote was already used or has expired";

/**
 * useQuote that refuses by failing (refuse_unless, QUOTE_NOT_USABLE) instead of answering false: for a
 * transaction whose hold goes out behind it without waiting for its answer (PostTransactionInput.oneFlight).
 * The caller reads the quote after its transaction rolled back, to say why.
 */
export async function useQuoteStrictly(q: Db, id: string, invocationId: string): Promise<void> {
  await preparedRaw(
    q,
    `with used as (${USE_QUOTE})
     select ${refuseUnless("exists (select 1 from used)", QUOTE_NOT_USABLE)}`,
    [invocationId, id],
  );
}

/** Deletes quotes never paid that expired more than `hours` ago (paid ones stay: payments point at them). */
export async function deleteStaleQuotes(q: Db, hours: number): Promise<number> {
  return q("quotes")
    .whereNull("used_at")
    .andWhere("expires_at", "<", q.raw("now() - make_interval(hours => ?)", [hours]))
    .del();
}
