import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { CommittedBeforeFailure, commitWithThisFlight, inOneFlight } from "../../shared/db/pipeline.js";
import { watchThePoolsConnection } from "../helpers/pg-socket.js";

// Pooled connections run in pg's pipeline mode, and a transaction's BEGIN does not wait for its answer
// (shared/db/pipeline.ts): statements asked for together go out before the first answer comes back.
// These tests watch one pooled connection's socket: what it writes, and when PostgreSQL's answers
// (ReadyForQuery, one per statement) arrive.

afterAll(async () => {
  await closeDb();
});

describe("pipelined statements", () => {
  it("send a transaction's BEGIN and its first statements before PostgreSQL answers BEGIN", async () => {
    await db().raw("select 1"); // the pool's first connection, made and idle
    const watch = await watchThePoolsConnection();
    try {
      const ids = await db().transaction(async (trx) => {
        const [a, b] = await inOneFlight(
          trx.raw("select txid_current() as id"),
          trx.raw("select txid_current() as id, now() as started"),
        );
        return [a.rows[0].id, b.rows[0].id];
      });
      expect(ids[0]).toBe(ids[1]); // both ran inside the one transaction
      const log = watch.log.filter((entry) => entry !== "socket");
      const firstAnswer = log.indexOf("answer");
      // BEGIN, both statements, then the answers; COMMIT after them.
      expect(log.slice(0, firstAnswer)).toEqual(["write", "write", "write"]);
      expect(log.slice(firstAnswer)).toEqual(["answer", "answer", "answer", "write", "answer"]);
    } finally {
      watch.stop();
    }
  });

  it("hand a flight to the socket in one write, and a statement asked for alone in one of its own", async () => {
    await db().raw("select 1");
    const watch = await watchThePoolsConnection();
    try {
      await db().transaction(async (trx) => {
        await inOneFlight(trx.raw("select 1"), trx.raw("select 2"), trx.raw("select 3"));
        await trx.raw("select 4");
      });
      const sent = watch.log.filter((entry) => entry !== "answer");
      // BEGIN and the flight's three statements, in one socket write; then the lone one; then COMMIT.
      expect(sent).toEqual([
        "write",
        "write",
        "write",
        "write",
        "socket",
        "write",
        "socket",
        "write",
        "socket",
      ]);
    } finally {
      watch.stop();
    }
  });

  it("answer in order, fail with the first statement's error once every one has settled, and roll back whole", async () => {
    const key = `test:pipeline:${randomUUID()}`;
    let secondSettled = false;
    const failed = await db()
      .transaction(async (trx) => {
        await trx("platform_settings").insert({ key, value: JSON.stringify({ probe: true }) });
        await inOneFlight(
          trx.raw("select 1 / 0"),
          trx.raw("select 1").finally(() => {
            secondSettled = true;
          }),
        );
      })
      .catch((error: unknown) => error as Error);
    expect(failed).toBeInstanceOf(Error);
    expect((failed as Error).message).toMatch(/division by zero/);
    expect(secondSettled).toBe(true); // refused as the aborted transaction's, and observed
    expect(await db()("platform_settings").where({ key }).first()).toBeUndefined();
    // The connection is whole afterwards: the next statements get their own answers.
    const [x, y] = await inOneFlight(db().raw("select 7 as v"), db().raw("select 8 as v"));
    expect([x.rows[0].v, y.rows[0].v]).toEqual([7, 8]);
  });

  it("throw the failure that aborted the transaction, not the refusals it caused, whatever the argument order", async () => {
    await expect(
      db().transaction(async (trx) => {
        // Started in this order (a knex query runs once something awaits it), listed the other way.
        const failing = Promise.resolve(trx.raw("select 1 / 0"));
        const refused = Promise.resolve(trx.raw("select 1"));
        await inOneFlight(refused, failing);
      }),
    ).rejects.toThrow(/division by zero/);
  });

  it("send COMMIT with a transaction's last flight, in its write, and end as PostgreSQL answers it", async () => {
    await db().raw("select 1");
    const watch = await watchThePoolsConnection();
    const key = `test:pipeline:${randomUUID()}`;
    try {
      const value = await db().transaction(async (trx) => {
        const insert = trx("platform_settings").insert({ key, value: JSON.stringify({ probe: true }) });
        expect(commitWithThisFlight(trx)).toBe(true);
        await insert;
        return "the handler's value";
      });
      expect(value).toBe("the handler's value");
      // BEGIN, the insert and COMMIT in one socket write, before PostgreSQL answers any (three answers,
      // one per statement); nothing is written after.
      expect(watch.log.filter((entry) => entry !== "write")).toEqual([
        "socket",
        "answer",
        "answer",
        "answer",
      ]);
    } finally {
      watch.stop();
    }
    expect(await db()("platform_settings").where({ key }).first()).toBeDefined();
  });

  it("roll back whole at an early COMMIT when a statement before it fails, with that statement's error", async () => {
    const key = `test:pipeline:${randomUUID()}`;
    const failed = await db()
      .transaction(async (trx) => {
        await trx("platform_settings").insert({ key, value: JSON.stringify({ probe: true }) });
        const failing = trx.raw("select 1 / 0");
        commitWithThisFlight(trx);
        await failing;
      })
      .catch((error: unknown) => error as Error);
    expect(failed).toBeInstanceOf(Error);
    expect((failed as Error).message).toMatch(/division by zero/);
    expect(await db()("platform_settings").where({ key }).first()).toBeUndefined();
    const [x] = await inOneFlight(db().raw("select 7 as v"));
    expect(x.rows[0].v).toBe(7);
  });

  it("refuse a statement asked for after the early COMMIT, and say the transaction committed regardless", async () => {
    const key = `test:pipeline:${randomUUID()}`;
    const failed = await db()
      .transaction(async (trx) => {
        const insert = trx("platform_settings").insert({ key, value: JSON.stringify({ probe: true }) });
        commitWithThisFlight(trx);
        await insert;
        await trx.raw("select 2"); // too late: never run outside the transaction
      })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CommittedBeforeFailure);
    expect(String((failed as CommittedBeforeFailure).cause)).toMatch(/already complete/);
    expect(await db()("platform_settings").where({ key }).first()).toBeDefined();
  });

  it("leave a savepoint's COMMIT to its transaction", async () => {
    const sent = await db().transaction((trx) =>
      trx.transaction(async (inner) => commitWithThisFlight(inner)),
    );
    expect(sent).toBe(false);
  });
});
