// Data: every key that exists before spend controls is a registration key from quickstart (nothing else
// created keys), and the registration key stays unrestricted: it may manage keys and decide approvals.
// New registration keys get the same powers from registerAgent.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex("api_keys").whereNull("created_by_key_id").update({ manage_keys: true, supervisor: true });
}

// No down: the columns this fills disappear with 20261122005000's down, and turning the powers off
// while they exist would lock every agent out of managing its own keys.
export async function down(): Promise<void> {}
