// Spend controls (issue 6): each API key carries its own policy, read with the key row on every request,
// so a change is effective on the next request in every process. Scopes restrict what the key may buy
// (listing categories, a per-call price ceiling, a seller allowlist or a blocklist — never both); limits
// cap what it may spend (per call, per UTC day); approval_above_micros holds dearer purchases for a
// supervisor's decision. supervisor and manage_keys are the key's powers (decide approvals; create,
// rotate and revoke keys). null = no restriction; amounts are micro-USDC.
import type { Knex } from "knex";

const CHECKS = ["api_keys_one_seller_list_check", "api_keys_policy_amounts_check"];

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_keys", (t) => {
    t.specificType("categories", "text[]");
    t.bigInteger("max_price_micros");
    t.specificType("seller_allowlist", "text[]");
    t.specificType("seller_blocklist", "text[]");
    t.bigInteger("per_call_limit_micros");
    t.bigInteger("daily_cap_micros");
    t.bigInteger("approval_above_micros");
    t.boolean("supervisor").notNullable().defaultTo(false);
    t.boolean("manage_keys").notNullable().defaultTo(false);
    t.check("seller_allowlist is null or seller_blocklist is null", [], CHECKS[0]);
    t.check(
      "coalesce(max_price_micros, 0) >= 0 and coalesce(per_call_limit_micros, 0) >= 0 " +
        "and coalesce(daily_cap_micros, 0) >= 0 and coalesce(approval_above_micros, 0) >= 0",
      [],
      CHECKS[1],
    );
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_keys", (t) => {
    t.dropChecks(CHECKS);
    t.dropColumns(
      "categories",
      "max_price_micros",
      "seller_allowlist",
      "seller_blocklist",
      "per_call_limit_micros",
      "daily_cap_micros",
      "approval_above_micros",
      "supervisor",
      "manage_keys",
    );
  });
}
