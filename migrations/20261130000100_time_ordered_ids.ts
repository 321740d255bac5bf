// Time-ordered ids for the rows every call writes (shared/kernel/ids.ts newTimeOrderedId, docs/benchmarks.md
// "The twelfth round"). A random (v4) UUID key puts each insert on a random leaf of its B-tree; the first
// change to a page after a checkpoint logs the whole page, so six such indexes made ~15 KB of a free
// execute's ~26 KB of WAL, and that WAL is what each durable commit waits to flush. A UUIDv7 key grows at
// the right edge: one hot leaf per index, logged in full once per checkpoint.
//
// time_ordered_uuid() is RFC 9562's version 7, made from gen_random_uuid(): its first 48 bits replaced by
// the Unix time in milliseconds, its version nibble set from 4 to 7 (bits 52 and 53 of the bytea; bit 54
// is already set). PostgreSQL 18 has uuidv7() built in; this works on 13 and later.
//
// Only the defaults change: the ids already stored stay as they are, and every column stays a uuid.
import type { Knex } from "knex";

/** Tables whose rows each call writes (free and paid executes, invokes, x402), keyed by a uuid id. */
const TABLES = [
  "invocations",
  "invocation_attempts",
  "receipts",
  "ledger_transactions",
  "payment_evidence",
  "x402_payments",
] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create function time_ordered_uuid() returns uuid language sql volatile parallel safe as $$
      select encode(
        set_bit(set_bit(
          overlay(uuid_send(gen_random_uuid())
                  placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
                  from 1 for 6),
          52, 1), 53, 1),
        'hex')::uuid
    $$`);
  for (const table of TABLES)
    await knex.raw(`alter table ${table} alter column id set default time_ordered_uuid()`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES)
    await knex.raw(`alter table ${table} alter column id set default gen_random_uuid()`);
  await knex.raw("drop function time_ordered_uuid()");
}
