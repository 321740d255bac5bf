// Bounded maps kept in use order, the least recently used first: the process's caches (kept task
// listings, ranking statistics, API keys, catalog pages) each bound their memory this way.

/** Sets `key` as the most recently used entry, then drops the least recently used past `max`. */
export function setRecent<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  for (const oldest of map.keys()) {
    if (map.size <= max) break;
    map.delete(oldest);
  }
}
