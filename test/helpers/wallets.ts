import type { Address, LocalAccount } from "viem";
import { expect } from "vitest";
import { db } from "../../shared/db/knex.js";
import { claimAddress, closeOpenLink, insertLink } from "../../shared/money/wallets/store.js";
import type { TestAgent } from "./factories.js";
import { api } from "./http.js";

/** Links a wallet to the agent through the API, as a client does: the challenge, then its signature. */
export async function linkWalletViaApi(agent: TestAgent, account: LocalAccount): Promise<void> {
  const step1 = await api("POST", "/api/crypto/connect", {
    key: agent.apiKey,
    body: { wallet_address: account.address },
  });
  const { challenge_id, message } = step1.body.challenge;
  const step2 = await api("POST", "/api/crypto/connect", {
    key: agent.apiKey,
    body: {
      wallet_address: account.address,
      challenge_id,
      signature: await account.signMessage({ message }),
    },
  });
  expect(step2.status).toBe(200);
}

/** Links an address to the agent straight in the database (replacing its link), for worker tests. */
export async function linkWalletDirect(agentId: string, address: Address): Promise<void> {
  await db().transaction(async (trx) => {
    await claimAddress(trx, agentId, address);
    await closeOpenLink(trx, agentId);
    await insertLink(trx, {
      agent_id: agentId,
      address,
      method: "generated",
      challenge_id: null,
      request_id: null,
    });
  });
}
