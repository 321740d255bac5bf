import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { preparedRaw } from "../../shared/db/prepared.js";
import { refusalOf, refusedAs, refuseUnless } from "../../shared/db/refusals.js";

// A statement that must refuse by failing calls refuse_unless (shared/db/refusals.ts): its reason comes
// back as the failure's message (sent as our statements are, through preparedRaw: knex's own raw prefixes
// the message with the statement), and refusedAs turns that one refusal into the caller's own error.

afterAll(async () => {
  await closeDb();
});

describe("refusals raised in SQL", () => {
  it("fail the statement with their reason when the condition does not hold, and pass it when it does", async () => {
    const run = (sql: string) => preparedRaw(db(), sql, []);
    expect((await run(`select ${refuseUnless("1 = 1", "test: never")} as ok`)).rows[0].ok).toBe(true);
    const failed = await run(`select ${refuseUnless("1 = 2", "test: one is not two")}`).catch(
      (error: unknown) => error,
    );
    expect(refusalOf(failed)).toBe("test: one is not two");
    expect(refusalOf(new Error("test: one is not two"))).toBeUndefined(); // not raised by refuse_unless
  });

  it("keep a reason a plain string literal: one with a quote mark is refused when the text is built", () => {
    expect(() => refuseUnless("true", "it's")).toThrow("no quote mark");
  });

  it("turn one refusal into the caller's error, and let any other error through as it is", async () => {
    class Mine extends Error {}
    const refused = preparedRaw(db(), `select ${refuseUnless("false", "test: mine")}`, []);
    await expect(refused.catch(refusedAs("test: mine", () => new Mine()))).rejects.toBeInstanceOf(Mine);
    const other = preparedRaw(db(), `select ${refuseUnless("false", "test: another")}`, []);
    await expect(other.catch(refusedAs("test: mine", () => new Mine()))).rejects.toThrow("test: another");
  });
});
