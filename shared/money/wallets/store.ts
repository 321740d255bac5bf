import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";

// Linked wallets: link challenges, address ownership and the link history (docs/payments.md "Wallet and funding").
// Addresses arrive here already checksummed (EIP-55).

export interface ChallengeRow {
  id: string;
  agent_id: string;
  address: string;
  chain_id: number;
  nonce: string;
  message: string;
  issued_at: Date;
  expires_at: Date;
  consumed_at: Date | null;
}

export type LinkMethod = "signature" | "generated";

export interface WalletLinkRow {
  id: string;
  agent_id: string;
  address: string;
  method: LinkMethod;
  challenge_id: string | null;
  request_id: string | null;
  linked_at: Date;
  unlinked_at: Date | null;
}

export async function insertChallenge(
  q: Db,
  row: Pick<ChallengeRow, "id" | "agent_id" | "address" | "chain_id" | "nonce" | "message" | "issued_at"> & {
    expires_at: Date;
  },
): Promise<ChallengeRow> {
  const [inserted] = await q<ChallengeRow>("wallet_link_challenges").insert(row).returning("*");
  return inserted!;
}

/** Challenges of an agent still open (not consumed, not expired): the cap on outstanding challenges. */
export async function countOpenChallenges(q: Db, agentId: string): Promise<number> {
  const [row] = await q("wallet_link_challenges")
    .where({ agent_id: agentId })
    .whereNull("consumed_at")
    .andWhere("expires_at", ">", q.fn.now())
    .count<{ count: string }[]>({ count: "*" });
  return Number(row?.count ?? 0);
}

/** Drops an agent's challenges that expired unused more than a day ago (housekeeping on each issue). */
export async function deleteStaleChallenges(q: Db, agentId: string): Promise<void> {
  await q("wallet_link_challenges")
    .where({ agent_id: agentId })
    .whereNull("consumed_at")
    .andWhere("expires_at", "<", q.raw("now() - interval '1 day'"))
    .delete();
}

/** The agent's challenge by id (another agent's reads as absent). */
export async function findChallenge(q: Db, agentId: string, id: string): Promise<ChallengeRow | undefined> {
  return q<ChallengeRow>("wallet_link_challenges").where({ id, agent_id: agentId }).first();
}

/**
 * Consumes a challenge exactly once: only an unconsumed, unexpired row is updated, so of two concurrent
 * uses one gets the row and the other gets undefined.
 */
export async function consumeChallenge(
  q: Db,
  agentId: string,
  id: string,
): Promise<ChallengeRow | undefined> {
  const [row] = await q<ChallengeRow>("wallet_link_challenges")
    .where({ id, agent_id: agentId })
    .whereNull("consumed_at")
    .andWhere("expires_at", ">", q.fn.now())
    .update({ consumed_at: q.fn.now() as unknown as Date })
    .returning("*");
  return row;
}

/**
 * Claims an address for an agent (first prover wins, forever) and returns its owner: the agent itself,
 * or the agent that claimed it before.
 */
export async function claimAddress(q: Db, agentId: string, address: string): Promise<string> {
  await q("wallet_addresses").insert({ address, agent_id: agentId }).onConflict("address").ignore();
  const row = await q("wallet_addresses").where({ address }).first("agent_id");
  return (row as { agent_id: string }).agent_id;
}

/** Locks the agent row: one link change per agent at a time. */
export async function lockAgentForLink(trx: Knex.Transaction, agentId: string): Promise<void> {
  await trx("agents").where({ id: agentId }).forUpdate().first("id");
}

/** The agent's open link, if any. */
export async function findOpenLink(q: Db, agentId: string): Promise<WalletLinkRow | undefined> {
  return q<WalletLinkRow>("wallet_links").where({ agent_id: agentId }).whereNull("unlinked_at").first();
}

/** Closes the agent's open link (history is kept). */
export async function closeOpenLink(q: Db, agentId: string): Promise<void> {
  await q("wallet_links")
    .where({ agent_id: agentId })
    .whereNull("unlinked_at")
    .update({ unlinked_at: q.fn.now() });
}

export async function insertLink(
  q: Db,
  row: Pick<WalletLinkRow, "agent_id" | "address" | "method" | "challenge_id" | "request_id">,
): Promise<WalletLinkRow> {
  const [inserted] = await q<WalletLinkRow>("wallet_links").insert(row).returning("*");
  return inserted!;
}
