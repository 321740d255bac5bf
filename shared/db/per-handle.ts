import type { Db } from "./knex.js";

// A process's caches of database rows are kept per database handle: a test may open several databases
// in one process, whose ids and catalog generations can coincide (kept catalog pages, kept listing
// records). Each handle's map lives as long as the handle does.

/** Maps kept per database handle: `of(q)` makes q's on first use, `peek(q)` answers it only if made. */
export function mapsPerHandle<K, V>() {
  const maps = new WeakMap<Db, Map<K, V>>();
  return {
    of(q: Db): Map<K, V> {
      let map = maps.get(q);
      if (!map) {
        map = new Map();
        maps.set(q, map);
      }
      return map;
    },
    peek(q: Db): Map<K, V> | undefined {
      return maps.get(q);
    },
  };
}
