// Data: the echo listing declares the output the spec defines for the echo tool, so its record can
// say ready_for_autonomous_invocation and show an example response; and it records who approved it
// (the platform, by this migration), so review_status 'approved' has its evidence.
import type { Knex } from "knex";

const ECHO_OUTPUT_SCHEMA = {
  type: "object",
  required: ["echo", "server"],
  properties: {
    echo: { type: "object", description: "the submitted input" },
    server: {
      type: "object",
      required: ["timestamp", "platform"],
      properties: {
        timestamp: { type: "string", format: "date-time" },
        platform: { type: "string" },
        received_at_ms: { type: "integer" },
        processing_time_ms: { type: "integer" },
        node_version: { type: "string" },
      },
    },
    headers_received: { type: "object" },
    tip: { type: "string" },
  },
};

export async function up(knex: Knex): Promise<void> {
  await knex("listings")
    .where({ slug: "echo", public_supply_origin: "first_party_service" })
    .update({
      output_schema: JSON.stringify(ECHO_OUTPUT_SCHEMA),
      data_retention: "none",
      allowed_use: "connectivity and integration testing",
      reviewed_by: "platform_seed_migration",
      reviewed_at: knex.fn.now(),
      review_notes: "first-party listing maintained by the platform",
    });
}

export async function down(knex: Knex): Promise<void> {
  await knex("listings").where({ slug: "echo", public_supply_origin: "first_party_service" }).update({
    output_schema: null,
    allowed_use: "",
    reviewed_by: null,
    reviewed_at: null,
    review_notes: null,
  });
}
