// A listing's runtime proof (listings.last_success_at: it puts a listing in the search lane) is
// refreshed by the statement that records a successful call, at most once a minute by that statement's
// own condition. Most successes fall inside the minute, yet carrying the update cost PostgreSQL on every
// one an update node, the listing's generated search column and an index probe, only to change nothing
// (docs/benchmarks.md "The seventh round"). So this process remembers when it last recorded a success
// with the proof and leaves the update out until a minute has passed; other processes keep their own
// memory, and the statement's condition still decides what is written.

/** The statement's own interval (recordSuccess in store/invocations.ts). */
const PROOF_INTERVAL_MS = 60_000;
/** Listings remembered at most (the oldest note goes first: its listing is simply proved again). */
const MAX_REMEMBERED = 10_000;

const provedAt = new Map<string, number>();

/** Whether a success of this listing should carry the runtime proof's update. */
export function runtimeProofDue(listingId: string, now = Date.now()): boolean {
  const at = provedAt.get(listingId);
  return at === undefined || now - at >= PROOF_INTERVAL_MS;
}

/** A success recorded with the proof: the listing's last_success_at is at most a minute old now. */
export function runtimeProofRecorded(listingId: string, now = Date.now()): void {
  provedAt.delete(listingId);
  provedAt.set(listingId, now);
  if (provedAt.size > MAX_REMEMBERED) provedAt.delete(provedAt.keys().next().value!);
}
