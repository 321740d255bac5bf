// `node dist/shared/db/migrate-cli.js latest|rollback|list` — the Procfile's release step.
import { loadConfigOrExit } from "../config.js";
import { closeDb, db } from "./knex.js";
import { listPending, migrateLatest, rollbackAll } from "./migrate.js";

const command = process.argv[2] ?? "latest";
loadConfigOrExit();
try {
  if (command === "latest") console.log(`applied: ${(await migrateLatest(db())).join(", ") || "nothing"}`);
  else if (command === "rollback") await rollbackAll(db());
  else if (command === "list") console.log(`pending: ${(await listPending(db())).join(", ") || "none"}`);
  else {
    console.error("usage: migrate-cli latest|rollback|list");
    process.exitCode = 2;
  }
} finally {
  await closeDb();
}
