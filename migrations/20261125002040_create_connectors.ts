// Connector records (issue 17, the spec's agent connector record v1): an agent's trading or banking MCP
// connector. The enums are the spec's, enforced here as well as at the API; risk_level is 'high' only.
// Properties beyond the record's own fields are kept verbatim in `extra` (the spec allows them). A probe
// fills last_probe_at and last_safe_status; it lists tools and never connects an account.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("connectors", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("owner_agent_id").notNullable().references("agents.id");
    t.text("deployment_id");
    t.text("connector_type").notNullable();
    t.text("status").notNullable();
    t.text("mcp_server_name").notNullable();
    t.text("endpoint");
    t.text("risk_level").notNullable().defaultTo("high");
    t.timestamp("last_probe_at", { useTz: true });
    t.jsonb("last_safe_status").notNullable();
    t.jsonb("extra").notNullable().defaultTo("{}");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("connector_type in ('trading_connector','banking_connector')", [], "connectors_type_check");
    t.check(
      "status in ('disconnected','connection_required','connected','disabled','error')",
      [],
      "connectors_status_check",
    );
    t.check(
      "mcp_server_name in ('trading-connector','banking-connector')",
      [],
      "connectors_server_name_check",
    );
    t.check("risk_level = 'high'", [], "connectors_risk_level_check");
    t.index(["owner_agent_id", "created_at"], "connectors_owner_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("connectors");
}
