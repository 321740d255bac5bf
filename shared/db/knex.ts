import type { Knex } from "knex";
import { getConfig } from "../config.js";
import { dbStatements } from "../observability/metrics.js";
import { pipelinedKnex } from "./pipeline.js";
// Installs pg's timestamptz reader for every pg client in the process (timestamps.ts).
import "./timestamps.js";

let instance: Knex | undefined;

/** The process-wide knex instance. int8 columns stay strings here; db modules turn money into bigint. */
export function db(): Knex {
  if (!instance) {
    const { databaseUrl, databasePoolMax } = getConfig();
    if (!databaseUrl)
      throw new Error("DATABASE_URL is not set (npm start embeds PostgreSQL; processes need it)");
    // Pipeline mode: statements asked for together go out together (pipeline.ts).
    instance = pipelinedKnex(databaseUrl, {
      pool: { min: 0, max: databasePoolMax },
      acquireConnectionTimeout: 10000,
    });
    instance.on("query", () => dbStatements.inc());
  }
  return instance;
}

export async function closeDb(): Promise<void> {
  const current = instance;
  instance = undefined;
  await current?.destroy();
}

export type Db = Knex | Knex.Transaction;
