import { findApiKeyByHash } from "../db/api-keys.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { hashApiKey, isWellFormedApiKey } from "./api-keys.js";

export interface Principal {
  agentId: string;
  apiKeyId: string;
}

/**
 * Resolves an Authorization header to the agent behind it. Missing, malformed, unknown and revoked keys
 * are all 401 UNAUTHORIZED; which one it was is said in the message, never whose key it might be.
 * Every request reads the key row, so a revocation is effective on the next request in every process.
 */
export async function authenticate(header: string | undefined): Promise<Principal> {
  if (!header) throw new AppError("UNAUTHORIZED", "missing Authorization: Bearer <api key>");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new AppError("UNAUTHORIZED", "Authorization must be 'Bearer <api key>'");
  const token = match[1]!;
  if (!isWellFormedApiKey(token)) throw new AppError("UNAUTHORIZED", "API key is malformed (expected amk_…)");
  const key = await findApiKeyByHash(db(), hashApiKey(token));
  if (!key) throw new AppError("UNAUTHORIZED", "API key is not recognised");
  if (key.revoked_at) throw new AppError("UNAUTHORIZED", "API key has been revoked");
  return { agentId: key.agent_id, apiKeyId: key.id };
}
