import type { Knex } from "knex";
import { GroupCommit, HOT_PATH_GROUPS } from "../db/group-commit.js";
import { db } from "../db/knex.js";
import { inOneFlight, sentAhead } from "../db/pipeline.js";
import { holdAndSettleTogether, type InvocationHold, type PaidSuccess } from "./paid-invocations.js";

// The paid execute's group commit (docs/benchmarks.md "The twenty-ninth round" and "The fortieth
// round"). A paid run writes twice: its claim with the hold, before the seller is called, and its success
// with the capture, after. Both lock the buyer's held account, so two groups of the two kinds never ran
// at once: each waited for the other's COMMIT, flush included. Here the two kinds share one group: the
// claims and successes that arrive while a group is in flight go together in one transaction and one
// flight: the claims' custody check and inserts and the successes' records, one lock of every account
// they move, one ledger write for every capture and hold, the keys' days of spend, and one COMMIT.

/**
 * A kind of paid write (submission.ts's claims, run-invocation.ts's successes): how one runs alone, in
 * its own transaction, and what its items add to a group's transaction.
 */
export interface PaidWriteKind<I, O> {
  /** One write, alone: a lone write, and each write of a group that failed. */
  alone(item: I): Promise<O>;
  /** The items' share of a group's transaction, their statements asked for in `trx` as it is called. */
  share(trx: Knex.Transaction, items: readonly I[]): PaidShare<O>;
}

/** What a kind's items add to a group's transaction. */
export interface PaidShare<O> {
  /** Statements sent ahead of the ledger's lock (the inserts, the records), each refusing by failing. */
  ahead: Promise<unknown>;
  /** Holds to write (claims). */
  holds?: readonly InvocationHold[];
  /** Successes to settle (successes). */
  successes?: readonly PaidSuccess[];
  /** Statements sent after the ledger's write (the keys' days of spend). */
  withWrites?: () => Promise<unknown>;
  /** The items' answers, in item order, once the flight is answered. */
  answers(): Promise<O[]>;
}

interface PaidWrite {
  kind: PaidWriteKind<unknown, unknown>;
  item: unknown;
}

const paidWrites = new GroupCommit<PaidWrite, unknown>(
  { one: (w) => w.kind.alone(w.item), many: (writes) => writeTogether(writes) },
  { ...HOT_PATH_GROUPS, name: "paid_writes" },
);

/** Writes the item: now, alone, if no paid group is in flight; else with the next group. */
export function writePaid<I, O>(kind: PaidWriteKind<I, O>, item: I): Promise<O> {
  return paidWrites.write({ kind: kind as PaidWriteKind<unknown, unknown>, item }) as Promise<O>;
}

/**
 * A group's writes in one transaction and one flight, all or nothing, not retried as a group: on any
 * failure nothing is written, and the group commit runs each write alone, which answers it.
 */
function writeTogether(writes: readonly PaidWrite[]): Promise<unknown[]> {
  const byKind = new Map<PaidWriteKind<unknown, unknown>, number[]>();
  writes.forEach((w, i) => {
    const at = byKind.get(w.kind);
    if (at) at.push(i);
    else byKind.set(w.kind, [i]);
  });
  return db().transaction(async (trx) => {
    const shares = [...byKind].map(([kind, at]) => ({
      at,
      share: kind.share(
        trx,
        at.map((i) => writes[i]!.item),
      ),
    }));
    const before = sentAhead(inOneFlight(...shares.map(({ share }) => share.ahead)));
    const withWrites = shares.flatMap(({ share }) => (share.withWrites ? [share.withWrites] : []));
    await holdAndSettleTogether(
      trx,
      shares.flatMap(({ share }) => share.holds ?? []),
      shares.flatMap(({ share }) => share.successes ?? []),
      before,
      withWrites.length > 0 ? () => inOneFlight(...withWrites.map((write) => write())) : undefined,
    );
    const answers = new Array<unknown>(writes.length);
    for (const { at, share } of shares) {
      const answered = await share.answers();
      at.forEach((i, j) => {
        answers[i] = answered[j];
      });
    }
    return answers;
  });
}
