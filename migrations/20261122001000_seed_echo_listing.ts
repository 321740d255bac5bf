// Data: the first-party echo listing, the free task that proves authentication, routing and response
// handling (spec "Echo tool"). Its endpoint is a path on the platform's own API, called over HTTP by the
// executions worker exactly like a seller endpoint.
import type { Knex } from "knex";

const ECHO_SLUG = "echo";

export async function up(knex: Knex): Promise<void> {
  await knex("listings").insert({
    slug: ECHO_SLUG,
    name: "Echo",
    description: "Free connectivity check: echoes the submitted input with server metadata.",
    category: "devtools",
    endpoint_url: "/api/tools/echo",
    pricing_model: "per_call",
    price_micros: 0,
    input_schema: JSON.stringify({
      type: "object",
      properties: {
        message: { type: "string", maxLength: 4000, default: "agentmarket connectivity probe" },
        metadata: { type: "object" },
      },
      additionalProperties: true,
    }),
    tags: ["echo", "test", "connectivity"],
    safe_to_retry: true,
    public_supply_origin: "first_party_service",
    platform_hosted: true,
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex("listings").where({ slug: ECHO_SLUG }).delete();
}
