// The listing fields the spec's read-time record needs that are stored, not computed: descriptive and
// policy fields a seller declares, review and proxy settings, and the verification verdict that the
// health probes (router issue) and the verification service will write. Counters, telemetry and trust
// are computed from invocations and probes at read time instead, so they can never drift.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("listings", (t) => {
    t.text("long_description").notNullable().defaultTo("");
    t.text("listing_type").notNullable().defaultTo("service");
    t.text("delivery_method").notNullable().defaultTo("api_endpoint");
    t.text("runtime").notNullable().defaultTo("api");
    t.text("data_retention").notNullable().defaultTo("none");
    t.text("allowed_use").notNullable().defaultTo("");
    t.specificType("risk_flags", "text[]").notNullable().defaultTo("{}");
    t.specificType("required_scopes", "text[]").notNullable().defaultTo("{}");
    t.boolean("featured").notNullable().defaultTo(false);
    t.boolean("tumbler_enabled").notNullable().defaultTo(false);
    t.text("review_status").notNullable().defaultTo("approved");
    t.integer("review_score");
    t.text("review_notes");
    t.timestamp("reviewed_at", { useTz: true });
    t.text("reviewed_by");
    t.text("proxy_mode").notNullable().defaultTo("direct");
    t.text("proxy_upstream_url");
    t.jsonb("proxy_headers").notNullable().defaultTo("{}");
    t.boolean("proxy_strip_path").notNullable().defaultTo(false);
    t.text("verification_status");
    t.timestamp("verified_at", { useTz: true });
    t.timestamp("retired_at", { useTz: true });
    t.check(
      "verification_status in ('verified','reachable','failed')",
      [],
      "listings_verification_status_check",
    );
    t.check("status in ('active','retired')", [], "listings_status_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("listings", (t) => {
    t.dropChecks(["listings_verification_status_check", "listings_status_check"]);
    for (const column of [
      "long_description",
      "listing_type",
      "delivery_method",
      "runtime",
      "data_retention",
      "allowed_use",
      "risk_flags",
      "required_scopes",
      "featured",
      "tumbler_enabled",
      "review_status",
      "review_score",
      "review_notes",
      "reviewed_at",
      "reviewed_by",
      "proxy_mode",
      "proxy_upstream_url",
      "proxy_headers",
      "proxy_strip_path",
      "verification_status",
      "verified_at",
      "retired_at",
    ]) {
      t.dropColumn(column);
    }
  });
}
