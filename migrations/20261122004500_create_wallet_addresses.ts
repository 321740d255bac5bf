// Who owns an external wallet address (docs/payments.md "Wallet and funding"). An address belongs to the first
// agent that proves control of it (a signed challenge, or a key we generated for it) and never moves to
// another agent: a USDC transfer from that address to the platform is then attributable to exactly one
// agent, today and for every deposit verified later. Stored in EIP-55 checksummed form (the API
// canonicalises every address before it gets here), so the primary key is the uniqueness rule.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("wallet_addresses", (t) => {
    t.text("address").primary();
    t.uuid("agent_id").notNullable().references("agents.id");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("address ~ '^0x[0-9a-fA-F]{40}$'", [], "wallet_addresses_address_check");
    t.index(["agent_id"], "wallet_addresses_agent_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("wallet_addresses");
}
