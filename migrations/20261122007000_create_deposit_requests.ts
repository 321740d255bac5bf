// Gasless deposits (docs/payments.md "Wallet and deposits"): POST /api/wallet/purchase {method: "authorization"}
// stores here the exact EIP-3009 TransferWithAuthorization the depositor is asked to sign — from (the
// linked wallet), to (the platform address), value, validAfter, validBefore and a random nonce, on one
// chain and token — so POST /api/wallet/purchase/authorize checks the signature against the message the
// server chose, never one the client sends. A request is used once: the platform submits it through
// durable-tx as the one transaction of ('deposit_authorization', request id), and the deposit it creates
// is unique per (chain, tx hash). The unique nonce per (chain, token, from) mirrors the token's own rule.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("deposit_requests", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.integer("chain_id").notNullable();
    t.text("token_address").notNullable();
    t.text("from_address").notNullable();
    t.text("to_address").notNullable();
    t.bigInteger("amount_micros").notNullable();
    t.bigInteger("valid_after").notNullable().defaultTo(0);
    t.bigInteger("valid_before").notNullable();
    t.text("nonce").notNullable();
    t.text("request_id");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(["chain_id", "token_address", "from_address", "nonce"], {
      indexName: "deposit_requests_nonce_once",
    });
    t.index(["agent_id", "valid_before"], "deposit_requests_agent_idx");
    t.check("nonce ~ '^0x[0-9a-f]{64}$'", [], "deposit_requests_nonce_check");
    t.check("amount_micros > 0", [], "deposit_requests_amount_check");
    t.check("valid_before > valid_after and valid_after >= 0", [], "deposit_requests_window_check");
    t.check(
      "from_address ~ '^0x[0-9a-fA-F]{40}$' and to_address ~ '^0x[0-9a-fA-F]{40}$' and token_address ~ '^0x[0-9a-fA-F]{40}$'",
      [],
      "deposit_requests_address_check",
    );
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("deposit_requests");
}
