import type { InsertGuard } from "../../db/prepared.js";
import { refuseUnless } from "../../db/refusals.js";

// The catalog's generation (migration 20261129000100): a number that moves, in the writer's transaction,
// whenever any listing is written (a refresh of last_success_at alone excepted; its first one moves it,
// migration 20261206000100). Listings read in a snapshot of generation g are exactly what the database
// holds for as long as the generation is still g, so a copy kept in memory can be proved current by the
// statement that acts on it, with no read of its own (docs/architecture.md "Caches that are proved").

/** The current generation, as a scalar subquery (read in the statement's own snapshot). */
export const CATALOG_GENERATION_SQL = "select generation from catalog_generation";

/**
 * A guard for a write that acts on listings read at `generation`: true only while no listing has been
 * written since. Its one binding is the generation (decimal text).
 */
export function catalogUnmoved(generation: string, options: { strict?: boolean } = {}): InsertGuard {
  const unmoved = `(${CATALOG_GENERATION_SQL}) = ?::bigint`;
  return {
    sql: options.strict ? refuseUnless(unmoved, CATALOG_MOVED) : unmoved,
    bindings: [generation],
  };
}

/**
 * Why a strict guard failed its write (refuse_unless): strict (catalogUnmoved's option), a moved catalog
 * fails the statement instead of writing nothing, so that what was sent behind it without waiting for its
 * answer (a paid hold and its COMMIT) rolls back with it.
 */
export const CATALOG_MOVED = "catalog: a listing was written since the copy was read";
