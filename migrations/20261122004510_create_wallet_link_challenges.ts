// Challenges of POST /api/crypto/connect: the server issues an EIP-4361-style message naming the agent,
// the address, the chain and a random nonce; the wallet signs it (EIP-191 personal_sign) and the link is
// made only if the signature recovers that address. The message is stored here, so the client cannot
// choose what it proves, and a challenge is consumed once (a conditional UPDATE on consumed_at) before
// it expires.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("wallet_link_challenges", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.text("address").notNullable();
    t.integer("chain_id").notNullable();
    t.text("nonce").notNullable();
    t.text("message").notNullable();
    t.timestamp("issued_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("expires_at", { useTz: true }).notNullable();
    t.timestamp("consumed_at", { useTz: true });
    t.check("address ~ '^0x[0-9a-fA-F]{40}$'", [], "wallet_link_challenges_address_check");
    t.check("expires_at > issued_at", [], "wallet_link_challenges_expiry_check");
    t.index(["agent_id", "expires_at"], "wallet_link_challenges_agent_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("wallet_link_challenges");
}
