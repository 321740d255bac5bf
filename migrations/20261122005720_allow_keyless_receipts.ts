// A receipt belongs to the invocation's agent; an x402 invocation has none (its buyer is a wallet), so
// its receipt has no agent either. Keyed invocations still always write their agent (the receipt copies
// it from the invocation in the same statement), and receipt reads stay owner-filtered.
// down: refuses while agentless receipts exist.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("receipts", (t) => {
    t.setNullable("agent_id");
  });
}

export async function down(knex: Knex): Promise<void> {
  const [row] = await knex("receipts").whereNull("agent_id").count({ n: "*" });
  if (Number(row?.n ?? 0) > 0) throw new Error("receipts of x402 invocations exist (agent_id is null)");
  await knex.schema.alterTable("receipts", (t) => {
    t.dropNullable("agent_id");
  });
}
