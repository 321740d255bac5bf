// Paying over x402 needs no registration, so an x402 invocation has no agent and no API key: it has the
// payer's address instead. The check keeps every other route exactly as before (agent and key required)
// and makes an x402 invocation name its payer and nothing else.
// down: refuses while x402 invocations exist (agent_id/api_key_id cannot become NOT NULL over them).
import type { Knex } from "knex";

const CHECK = "invocations_identity_check";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.setNullable("agent_id");
    t.setNullable("api_key_id");
  });
  await knex.raw(`
    alter table invocations add constraint ${CHECK} check (
      case when route = 'x402'
        then agent_id is null and api_key_id is null and payer_address is not null
        else agent_id is not null and api_key_id is not null and payer_address is null
      end)`);
}

export async function down(knex: Knex): Promise<void> {
  const [row] = await knex("invocations").where({ route: "x402" }).count({ n: "*" });
  if (Number(row?.n ?? 0) > 0) {
    throw new Error(
      "x402 invocations exist: they have no agent or key, so the columns cannot become NOT NULL",
    );
  }
  await knex.raw(`alter table invocations drop constraint ${CHECK}`);
  await knex.schema.alterTable("invocations", (t) => {
    t.dropNullable("agent_id");
    t.dropNullable("api_key_id");
  });
}
