import type { Db } from "../../../db/knex.js";

// Gasless deposit requests (docs/payments.md "Wallet and deposits"): the EIP-3009 authorization the server asked
// a depositor to sign, stored so the signature is checked against the server's message. A request is
// "submitted" once durable-tx holds a transaction for it (chain_transactions, purpose + subject id).

export interface DepositRequestRow {
  id: string;
  agent_id: string;
  chain_id: number;
  token_address: string;
  from_address: string;
  to_address: string;
  amount_micros: bigint;
  valid_after: bigint;
  valid_before: bigint;
  nonce: string;
  request_id: string | null;
  created_at: Date;
}

type RawRequest = Omit<DepositRequestRow, "amount_micros" | "valid_after" | "valid_before"> & {
  amount_micros: string;
  valid_after: string;
  valid_before: string;
};

function toRequest(row: RawRequest): DepositRequestRow {
  return {
    ...row,
    amount_micros: BigInt(row.amount_micros),
    valid_after: BigInt(row.valid_after),
    valid_before: BigInt(row.valid_before),
  };
}

export type NewDepositRequest = Omit<DepositRequestRow, "id" | "created_at">;

export async function insertDepositRequest(q: Db, row: NewDepositRequest): Promise<DepositRequestRow> {
  const [inserted] = await q<RawRequest>("deposit_requests")
    .insert({
      ...row,
      amount_micros: row.amount_micros.toString(),
      valid_after: row.valid_after.toString(),
      valid_before: row.valid_before.toString(),
    })
    .returning("*");
  return toRequest(inserted!);
}

/** The agent's request by id (another agent's reads as absent). */
export async function findAgentDepositRequest(
  q: Db,
  agentId: string,
  id: string,
): Promise<DepositRequestRow | undefined> {
  const row = await q<RawRequest>("deposit_requests").where({ id, agent_id: agentId }).first();
  return row ? toRequest(row) : undefined;
}

/** Requests of the agent still usable: not expired and not submitted under `purpose`. */
export async function countOpenDepositRequests(q: Db, agentId: string, purpose: string): Promise<number> {
  const [row] = await q("deposit_requests as r")
    .where("r.agent_id", agentId)
    .andWhere("r.valid_before", ">", q.raw("extract(epoch from now())"))
    .whereNotExists((sub) =>
      sub
        .from("chain_transactions as c")
        .where("c.purpose", purpose)
        .andWhere("c.subject_id", q.raw("r.id::text")),
    )
    .count<{ count: string }[]>({ count: "*" });
  return Number(row?.count ?? 0);
}

/** Drops the agent's requests that expired unsubmitted more than a day ago (housekeeping on each issue). */
export async function deleteStaleDepositRequests(q: Db, agentId: string, purpose: string): Promise<void> {
  await q("deposit_requests as r")
    .where("r.agent_id", agentId)
    .andWhere("r.valid_before", "<", q.raw("extract(epoch from now() - interval '1 day')"))
    .whereNotExists((sub) =>
      sub
        .from("chain_transactions as c")
        .where("c.purpose", purpose)
        .andWhere("c.subject_id", q.raw("r.id::text")),
    )
    .delete();
}
