// Daily caps (issue 6): one row per key per UTC day. A paid call reserves its hold here in the same
// transaction as the ledger hold, with a conditional upsert (reserved + spent + amount <= cap), so
// concurrent calls in any number of API processes can never reserve past the cap. A capture moves the
// reservation to spent_micros (what it captured); a release returns it. The checks catch a double return.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("api_key_spend_days", (t) => {
    t.uuid("api_key_id").notNullable().references("api_keys.id");
    t.date("day").notNullable();
    t.bigInteger("reserved_micros").notNullable().defaultTo(0);
    t.bigInteger("spent_micros").notNullable().defaultTo(0);
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(["api_key_id", "day"]);
    t.check("reserved_micros >= 0", [], "api_key_spend_days_reserved_check");
    t.check("spent_micros >= 0", [], "api_key_spend_days_spent_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("api_key_spend_days");
}
