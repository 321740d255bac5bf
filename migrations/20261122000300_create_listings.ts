// Listings (capabilities): enough columns for first-party providers and the execute path. Prices are
// integer micro-USDC. endpoint_url is absolute for sellers; first-party listings store a path that
// workers resolve against FIRST_PARTY_BASE_URL.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("listings", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("seller_id").references("agents.id");
    t.text("slug").notNullable().unique();
    t.text("name").notNullable();
    t.text("description").notNullable().defaultTo("");
    t.text("category").notNullable();
    t.text("endpoint_url").notNullable();
    t.text("pricing_model").notNullable().defaultTo("per_call");
    t.bigInteger("price_micros").notNullable().defaultTo(0);
    t.text("currency").notNullable().defaultTo("USDC");
    t.jsonb("input_schema").notNullable();
    t.jsonb("output_schema");
    t.specificType("tags", "text[]").notNullable().defaultTo("{}");
    t.text("status").notNullable().defaultTo("active");
    t.text("version").notNullable().defaultTo("1.0.0");
    t.boolean("safe_to_retry").notNullable().defaultTo(false);
    t.integer("max_latency_ms").notNullable().defaultTo(30000);
    t.integer("rate_limit").notNullable().defaultTo(100);
    t.integer("concurrency_limit").notNullable().defaultTo(10);
    t.text("public_supply_origin").notNullable().defaultTo("external_seller");
    t.boolean("platform_hosted").notNullable().defaultTo(false);
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("price_micros >= 0", [], "listings_price_nonnegative");
    t.index(["status"]);
    t.index(["tags"], undefined, "gin");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("listings");
}
