// Key rotation with a grace period (issue 6): rotating gives a key a new secret and keeps the previous
// one valid until previous_expires_at, on the same row — so the key's id, scopes, limits, daily spend
// and history carry over, and revoking the key ends both secrets at once. Only the SHA-256 of the
// previous secret is kept (unique, like key_hash), with its last four characters for display.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_keys", (t) => {
    t.text("previous_key_hash").unique({ indexName: "api_keys_previous_key_hash_unique" });
    t.text("previous_last_four");
    t.timestamp("previous_expires_at", { useTz: true });
    t.timestamp("rotated_at", { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("api_keys", (t) => {
    t.dropUnique(["previous_key_hash"], "api_keys_previous_key_hash_unique");
    t.dropColumns("previous_key_hash", "previous_last_four", "previous_expires_at", "rotated_at");
  });
}
