import { readdir } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Knex } from "knex";

/**
 * Loads migrations from migrations/ next to this build: .ts files when running from source (tests),
 * .js files when running compiled (production). Ordered by their timestamped names.
 */
class DirectoryMigrationSource implements Knex.MigrationSource<string> {
  private readonly dir = fileURLToPath(new URL("../../migrations/", import.meta.url));
  private readonly extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";

  async getMigrations(): Promise<string[]> {
    const files = await readdir(this.dir);
    return files.filter((f) => f.endsWith(this.extension) && !f.endsWith(".d.ts")).sort();
  }

  getMigrationName(file: string): string {
    return file.replace(/\.(ts|js)$/, "");
  }

  async getMigration(file: string): Promise<Knex.Migration> {
    return (await import(pathToFileURL(`${this.dir}${file}`).href)) as Knex.Migration;
  }
}

const source = new DirectoryMigrationSource();

export async function migrateLatest(knex: Knex): Promise<string[]> {
  const [, applied] = (await knex.migrate.latest({ migrationSource: source })) as [number, string[]];
  return applied;
}

export async function rollbackAll(knex: Knex): Promise<void> {
  await knex.migrate.rollback({ migrationSource: source }, true);
}

export async function listPending(knex: Knex): Promise<string[]> {
  const [, pending] = (await knex.migrate.list({ migrationSource: source })) as [
    unknown[],
    { file: string }[],
  ];
  return pending.map((p) => p.file);
}
