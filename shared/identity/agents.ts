import { generateKeyPairSync } from "node:crypto";
import { recordAudit } from "../audit/index.js";
import { db } from "../db/knex.js";
import { apiKeyDisplay, generateApiKey, hashApiKey } from "./api-keys.js";
import { insertAgent } from "./store/agents.js";
import { insertApiKey } from "./store/api-keys.js";

export type Intent = "buyer" | "seller" | "both";

export interface Registration {
  agentId: string;
  name: string;
  intent: Intent;
  apiKey: string;
  signingKey: string;
  signingPublicKey: string;
  createdAt: Date;
}

/**
 * Registers an agent: identity, one API key (stored only as a hash) and an Ed25519 signing key pair
 * (only the public half is stored). Both secrets are returned once and can never be read again.
 */
export async function registerAgent(name: string, intent: Intent, requestId: string): Promise<Registration> {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const signingPublicKey = publicKey.export({ format: "der", type: "spki" }).toString("base64url");
  const signingKey = privateKey.export({ format: "der", type: "pkcs8" }).toString("base64url");
  const apiKey = generateApiKey();
  const display = apiKeyDisplay(apiKey);

  return db().transaction(async (trx) => {
    const agent = await insertAgent(trx, { name, intent, signing_public_key: signingPublicKey });
    const key = await insertApiKey(trx, {
      agent_id: agent.id,
      key_hash: hashApiKey(apiKey),
      prefix: display.prefix,
      last_four: display.lastFour,
      // The registration key is unrestricted (docs/payments.md "Keys, scopes and spend limits").
      manage_keys: true,
      supervisor: true,
    });
    await recordAudit(trx, {
      actorAgentId: agent.id,
      action: "agent.registered",
      subjectType: "agent",
      subjectId: agent.id,
      requestId,
      data: { intent, api_key_id: key.id },
    });
    return {
      agentId: agent.id,
      name: agent.name,
      intent: agent.intent,
      apiKey,
      signingKey,
      signingPublicKey,
      createdAt: agent.created_at,
    };
  });
}
