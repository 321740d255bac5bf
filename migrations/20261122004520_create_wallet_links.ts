// Which address an agent has linked, with history: re-linking closes the current row (unlinked_at) and
// opens a new one, so the address a past deposit was checked against stays on record. At most one open
// link per agent (partial unique index). method says how control was proven: a signed challenge, or a
// key the platform generated and showed once (POST /api/crypto/wallet).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("wallet_links", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.text("address").notNullable().references("wallet_addresses.address");
    t.text("method").notNullable();
    t.uuid("challenge_id").references("wallet_link_challenges.id");
    t.text("request_id");
    t.timestamp("linked_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("unlinked_at", { useTz: true });
    t.check("method in ('signature','generated')", [], "wallet_links_method_check");
    t.check("(method = 'signature') = (challenge_id is not null)", [], "wallet_links_proof_check");
    t.index(["address"], "wallet_links_address_idx");
  });
  await knex.raw(
    "create unique index wallet_links_one_open_per_agent on wallet_links (agent_id) where unlinked_at is null",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("wallet_links");
}
