// Data: echo is the platform's own connectivity check, served by the API itself; the spec's observed
// per-listing limits (100 calls a minute, 10 at once) are for seller endpoints and would turn a busy
// deployment's health checks into 429s. Echo gets limits sized for the platform instead.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex("listings")
    .where({ slug: "echo", public_supply_origin: "first_party_service" })
    .update({ rate_limit: 600000, concurrency_limit: 1024 });
}

export async function down(knex: Knex): Promise<void> {
  await knex("listings")
    .where({ slug: "echo", public_supply_origin: "first_party_service" })
    .update({ rate_limit: 100, concurrency_limit: 10 });
}
