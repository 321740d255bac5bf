import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { preparedRaw } from "../../shared/db/prepared.js";
import { builtFullTransactor } from "../../shared/db/transactor.js";

// A top-level transaction's transactor is a stand-in that builds knex's own only when something beyond
// what prepared statements and knex's commit read is asked of it (shared/db/transactor.ts). Whichever
// it is, the handler must see knex's behaviour: these tests use both and count the builds.

const TABLE = "transactor_test_rows";

beforeAll(async () => {
  await db().raw(`create table if not exists ${TABLE} (id serial primary key, note text not null)`);
  await db().raw(`truncate ${TABLE}`);
});

afterAll(async () => {
  await db().raw(`drop table if exists ${TABLE}`);
  await closeDb();
});

const notes = async (): Promise<string[]> =>
  (await db()(TABLE).select("note").orderBy("id")).map((r: { note: string }) => r.note);

describe("a transaction's transactor", () => {
  it("builds nothing for prepared statements, and commits them", async () => {
    let used: object | undefined;
    const seen = await db().transaction(async (trx) => {
      used = trx;
      await preparedRaw(trx, `insert into ${TABLE} (note) values (?)`, ["prepared"]);
      return { isTransaction: trx.isTransaction, completed: trx.isCompleted() };
    });
    expect(seen).toEqual({ isTransaction: true, completed: false });
    expect(builtFullTransactor(used!)).toBe(false);
    expect(await notes()).toContain("prepared");
  });

  it("rolls prepared statements back when the handler throws, still building nothing", async () => {
    let used: object | undefined;
    await expect(
      db().transaction(async (trx) => {
        used = trx;
        await preparedRaw(trx, `insert into ${TABLE} (note) values (?)`, ["thrown away"]);
        throw new Error("the handler fails");
      }),
    ).rejects.toThrow("the handler fails");
    expect(builtFullTransactor(used!)).toBe(false);
    expect(await notes()).not.toContain("thrown away");
  });

  it("builds knex's transactor for a query builder, raw and a savepoint, all inside the one transaction", async () => {
    let used: object | undefined;
    const heard: string[] = []; // knex's query events reach the pool's knex, as from knex's own client
    const hear = (query: { sql: string }) => heard.push(query.sql);
    db().on("query", hear);
    await db().transaction(async (trx) => {
      used = trx;
      const ours = await preparedRaw(trx, "select txid_current() as id", []);
      await trx(TABLE).insert({ note: "built" });
      const viaRaw = await trx.raw("select txid_current() as id");
      expect(viaRaw.rows[0].id).toBe(ours.rows[0].id);
      // A savepoint that fails rolls back alone; the outer transaction goes on.
      await expect(
        trx.transaction(async (inner) => {
          await inner(TABLE).insert({ note: "savepoint" });
          throw new Error("the savepoint fails");
        }),
      ).rejects.toThrow("the savepoint fails");
      await trx.transaction(async (inner) => inner(TABLE).insert({ note: "kept savepoint" }));
    });
    db().off("query", hear);
    expect(builtFullTransactor(used!)).toBe(true);
    expect(heard).toEqual(expect.arrayContaining(["BEGIN;", "select txid_current() as id", "COMMIT;"]));
    const all = await notes();
    expect(all).toEqual(expect.arrayContaining(["built", "kept savepoint"]));
    expect(all).not.toContain("savepoint");
  });

  it("keeps what was set on it before knex's was built, and refuses statements once complete", async () => {
    let kept: unknown;
    await db().transaction(async (trx) => {
      (trx as unknown as Record<string, unknown>).mark = "set early";
      await trx(TABLE).insert({ note: "after the mark" });
      kept = (trx as unknown as Record<string, unknown>).mark;
      expect(typeof trx).toBe("function");
      expect((trx as unknown as Record<string, unknown>).executionPromise).toBeInstanceOf(Promise);
    });
    expect(kept).toBe("set early");

    let escaped: import("knex").Knex.Transaction | undefined;
    await db().transaction(async (trx) => {
      escaped = trx;
    });
    await expect(preparedRaw(escaped!, "select 1", [])).rejects.toThrow("Transaction query already complete");
    await expect(escaped!.raw("select 1")).rejects.toThrow("Transaction query already complete");
  });

  it("serves knex's `transacting` and enumeration, as the migrator uses them", async () => {
    await db().transaction(async (trx) => {
      // knex refuses an "empty" transaction here (lodash's isEmpty enumerates it).
      await db()(TABLE).insert({ note: "transacting" }).transacting(trx);
      expect(Object.keys(trx)).toEqual(expect.arrayContaining(["isTransaction", "commit", "rollback"]));
    });
    expect(await notes()).toContain("transacting");
  });

  it("commits and rolls back by hand, as knex's transactor does", async () => {
    const trx = await db().transaction();
    await preparedRaw(trx, `insert into ${TABLE} (note) values (?)`, ["by hand, rolled back"]);
    await trx.rollback();
    const again = await db().transaction();
    await again(TABLE).insert({ note: "by hand, committed" });
    await again.commit();
    const all = await notes();
    expect(all).toContain("by hand, committed");
    expect(all).not.toContain("by hand, rolled back");
  });
});
