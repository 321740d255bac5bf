import type { InvalidationBus } from "../invalidation.js";
import { setRecent } from "../kernel/recent.js";

// Resolved API keys, per process, so that an authenticated request does not read the key row each time
// (docs/benchmarks.md "The third round"). Correct because it is told: a revocation or rotation publishes
// the key's id on the invalidation bus and answers only once no process can still answer from an entry
// of it (shared/invalidation.ts). Only a key's current secret is kept: a rotated-out secret's grace
// period is judged by the database clock on every request, and an unknown secret is never remembered.

/**
 * A backstop, not the mechanism: an entry is read again after this long even if no change was told
 * (a rotation whose publish failed while the other processes stayed connected to Redis).
 */
export const KEY_CACHE_MAX_AGE_MS = 60_000;

/** What a key resolves to (auth.ts's Principal); only its key id matters here. */
interface Resolved {
  apiKeyId: string;
}

interface Entry<P extends Resolved> {
  principal: P;
  at: number;
}

export class KeyCache<P extends Resolved = Resolved> {
  /** Secret hash → principal, least recently used first. */
  private readonly entries = new Map<string, Entry<P>>();

  constructor(
    private readonly bus: InvalidationBus,
    private readonly maxEntries: number,
  ) {
    bus.on("api_keys", (ids) => this.forget(ids));
  }

  /** The principal for a secret hash, when the bus vouches that no change has been missed. */
  get(secretHash: string): P | undefined {
    if (!this.bus.isFresh()) return undefined;
    const hit = this.entries.get(secretHash);
    if (!hit) return undefined;
    this.entries.delete(secretHash);
    if (performance.now() - hit.at >= KEY_CACHE_MAX_AGE_MS) return undefined;
    this.entries.set(secretHash, hit);
    return hit.principal;
  }

  /** The generation to hand back to `remember` after the database read it guards. */
  generation(): number {
    return this.bus.generation();
  }

  /** Keeps what a read found, unless a change landed since `generation` was taken. */
  remember(secretHash: string, principal: P, generation: number): void {
    if (generation !== this.bus.generation() || !this.bus.isFresh()) return;
    setRecent(this.entries, secretHash, { principal, at: performance.now() }, this.maxEntries);
  }

  /** Drops the entries of these key ids (none given: every entry). */
  private forget(ids: string[]): void {
    if (ids.length === 0) {
      this.entries.clear();
      return;
    }
    const gone = new Set(ids);
    for (const [hash, entry] of this.entries)
      if (gone.has(entry.principal.apiKeyId)) this.entries.delete(hash);
  }
}
