// Evidence, never assumption (DESIGN §4): one append-only row per evidence state of a money subject
// (an invocation, a deposit, later an x402 payment or a payout), each with its own source — a ledger
// transaction, a provider response, a signature, a tx hash and block. A status or receipt reports only
// states that have a row here. The unique index makes recording a state idempotent under redelivery.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("payment_evidence", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.uuid("agent_id").references("agents.id");
    t.uuid("invocation_id").references("invocations.id");
    t.text("subject_type").notNullable();
    t.text("subject_id").notNullable();
    t.text("state").notNullable();
    t.text("source").notNullable();
    t.text("source_ref");
    t.bigInteger("amount_micros");
    t.text("currency");
    t.jsonb("details").notNullable().defaultTo("{}");
    t.unique(["subject_type", "subject_id", "state"], { indexName: "payment_evidence_once_per_state" });
    t.index(["invocation_id"], "payment_evidence_invocation_idx");
    t.check(
      "state in ('challenge','authorization','execution','confirmation','settlement','capture','refund','payout','outcome','deposit')",
      [],
      "payment_evidence_state_check",
    );
    t.check("amount_micros is null or amount_micros >= 0", [], "payment_evidence_amount_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("payment_evidence");
}
