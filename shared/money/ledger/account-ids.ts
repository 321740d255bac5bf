import type { AccountRef, LedgerAccountRow } from "./store.js";

/**
 * Account ids this process has seen, by the key they answer to (owner, kind, currency), so that a post
 * sent in one flight names its accounts by id: its lock is one index probe on the primary key, and its
 * write joins the accounts by id instead of looking each leg's account up by key (an init plan a leg:
 * a paid group's hold run of 16 made 32 lookups of 2 accounts; docs/benchmarks.md "The thirty-third
 * round").
 *
 * Why a kept id stays right: an account's id never changes for its key (no code updates an account's
 * owner, kind or currency, and none deletes an account), and ids are UUIDs, so a kept id names either its
 * own account or, in a database where it was never made (a test's own database, a table emptied), no
 * row at all. Then the one-flight write refuses with IN_FLIGHT_REFUSALS.accountMissing, the flight rolls
 * back whole, the caller answers it the slow way (by key), and forgetAccountIds drops what was kept.
 * Only the posts that send their write in the lock's flight use these ids: the two-step post names its
 * accounts as its caller did, so that it can make one on first use.
 */
const known = new Map<string, string>();

/** A bound, so that a process serving many agents keeps the recently used ones (oldest dropped first). */
const MAX_KNOWN = 10_000;

function keyName(owner: string | null, kind: string, currency: string): string {
  return `${owner ?? ""}/${kind}/${currency}`;
}

/** The ref by id when this process knows the key's account; else the ref as it was. */
export function byKnownId(ref: AccountRef): AccountRef {
  if ("id" in ref) return ref;
  const id = known.get(keyName(ref.owner, ref.kind, ref.currency));
  return id === undefined ? ref : { id };
}

/** Keeps the ids of rows read from the database (a lock's answer: committed rows, each with its key). */
export function learnAccountIds(
  rows: readonly Pick<LedgerAccountRow, "id" | "owner_agent_id" | "kind" | "currency">[],
): void {
  for (const row of rows) {
    const name = keyName(row.owner_agent_id, row.kind, row.currency);
    // Delete first, so that a re-learned key moves to the young end of the map's order.
    known.delete(name);
    known.set(name, row.id);
    if (known.size > MAX_KNOWN) known.delete(known.keys().next().value!);
  }
}

/** Drops every kept id: a write found an account it named by a kept id missing. */
export function forgetAccountIds(): void {
  known.clear();
}
