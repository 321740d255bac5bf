import type { Db } from "../../db/knex.js";
import { preparedRaw } from "../../db/prepared.js";
import type { AgentRow } from "../../identity/index.js";
import type { SellerFacts } from "../listing-facts.js";

/**
 * A page's sellers, as a named statement (shared/db/prepared.ts): one text whatever the number of
 * sellers, planned once per connection (docs/benchmarks.md "The thirty-seventh round").
 */
export const SELLERS_SQL = "select id, name, created_at from agents where id = any(?::uuid[])";

/** Seller summaries for a page of listings, one query. */
export async function readSellers(q: Db, sellerIds: string[]): Promise<Map<string, SellerFacts>> {
  if (sellerIds.length === 0) return new Map();
  const rows = (await preparedRaw(q, SELLERS_SQL, [sellerIds])).rows as SellerFacts[];
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * The agent row, locked until the transaction ends: publishing serializes on it, so two concurrent
 * publishes cannot both take the seller's one free slot.
 */
export async function lockAgent(q: Db, agentId: string): Promise<AgentRow | undefined> {
  return (await q("agents").where({ id: agentId }).forUpdate().first()) as AgentRow | undefined;
}

export async function findAgent(q: Db, agentId: string): Promise<AgentRow | undefined> {
  return (await q("agents").where({ id: agentId }).first()) as AgentRow | undefined;
}
