import type { Db } from "./knex.js";

export interface ApiKeyRow {
  id: string;
  agent_id: string;
  key_hash: string;
  prefix: string;
  last_four: string;
  created_at: Date;
  revoked_at: Date | null;
}

export async function insertApiKey(
  q: Db,
  key: Pick<ApiKeyRow, "agent_id" | "key_hash" | "prefix" | "last_four">,
): Promise<ApiKeyRow> {
  const [row] = await q<ApiKeyRow>("api_keys").insert(key).returning("*");
  return row!;
}

export async function findApiKeyByHash(q: Db, keyHash: string): Promise<ApiKeyRow | undefined> {
  return q<ApiKeyRow>("api_keys").where({ key_hash: keyHash }).first();
}

export async function revokeApiKey(q: Db, id: string): Promise<void> {
  await q("api_keys").where({ id }).whereNull("revoked_at").update({ revoked_at: q.fn.now() });
}
