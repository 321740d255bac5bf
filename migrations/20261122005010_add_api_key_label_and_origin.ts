// Agents hold several keys now (issue 6): a label to tell them apart, and the key that created each one
// (null = the registration key from quickstart), so a key's authority can be traced back to its root.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_keys", (t) => {
    t.text("name");
    t.uuid("created_by_key_id").references("api_keys.id");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_keys", (t) => {
    t.dropColumn("created_by_key_id");
    t.dropColumn("name");
  });
}
