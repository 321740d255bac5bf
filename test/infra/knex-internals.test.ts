import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

// shared/db/pipeline.ts and shared/db/transactor.ts stand in for parts of knex's transaction that knex
// does not export (its Transaction#_onAcquire, makeTxClient and makeTransactor, knex 3.3). A knex whose
// transaction code changed must be read again before it runs under them: this test fails first.

const require = createRequire(import.meta.url);

describe("the knex internals the pipeline stands in for", () => {
  it("are knex 3.3.0's, as the stand-ins were written for", () => {
    const { version } = require("knex/package.json") as { version: string };
    expect(version).toBe("3.3.0");
  });

  it("still start a transaction with makeTxClient and makeTransactor, as _onAcquire is replaced", () => {
    const source = readFileSync(require.resolve("knex/lib/execution/transaction.js"), "utf8");
    const from = source.indexOf("async _onAcquire(");
    const onAcquire = source.slice(from, source.indexOf("\n  _evaluateContainer(", from));
    expect(onAcquire).toContain("makeTxClient(");
    expect(onAcquire).toContain("makeTransactor(this, connection, trxClient)");
    expect(source).toContain(
      "function makeTransactor(trx, connection, trxClient) {\n  const transactor = makeKnex(trxClient);",
    );
  });
});
