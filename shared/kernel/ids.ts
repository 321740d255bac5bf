import { v7 as uuidv7 } from "uuid";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids that are not UUIDs are simply unknown (404), never a database cast error (500). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits. The id of a row that every
 * call writes (an invocation here; its attempts and receipt get the database's time_ordered_uuid(),
 * migrations/20261130000100). Ids that grow with time land at the right edge of their B-tree indexes,
 * so after a checkpoint PostgreSQL logs a full image of one hot leaf page per index instead of one per
 * insert: random v4 ids made ~15 KB of a free execute's ~26 KB of WAL (docs/benchmarks.md "The twelfth
 * round"). The 74 random bits keep the id unguessable; the time it carries is the row's created_at,
 * which its record shows anyway.
 */
export function newTimeOrderedId(): string {
  return uuidv7();
}

/**
 * The least time-ordered id of the given moment: its 48 bits of Unix milliseconds, every other bit 0.
 * Every id newTimeOrderedId made at that moment or later sorts at or above it (PostgreSQL orders uuids
 * byte by byte), so `id >= floor` is a range of a time-ordered primary key: the rows since then.
 */
export function timeOrderedIdFloor(at: Date): string {
  const hex = Math.max(0, Math.floor(at.getTime())).toString(16).padStart(12, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}
