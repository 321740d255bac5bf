import type { InsertGuard } from "../../db/prepared.js";

// The catalog's generation (migration 20261129000100): a number that moves, in the writer's transaction,
// whenever any listing is written (last_success_at alone excepted). Listings read in a snapshot of
// generation g are exactly what the database holds for as long as the generation is still g, so a copy
// kept in memory can be proved current by the statement that acts on it, with no read of its own
// (docs/architecture.md "Caches that are proved").

/** The current generation, as a scalar subquery (read in the statement's own snapshot). */
export const CATALOG_GENERATION_SQL = "select generation from catalog_generation";

/**
 * A guard for a write that acts on listings read at `generation`: true only while no listing has been
 * written since. Its one binding is the generation (decimal text).
 */
export function catalogUnmoved(generation: string): InsertGuard {
  return { sql: `(${CATALOG_GENERATION_SQL}) = ?::bigint`, bindings: [generation] };
}
