// Whole days on the wall clock, in one place: a listing's days since its last call, a seller bond's age
// and when it may be downgraded, a key's UTC day of spend.

/** One day in milliseconds (UTC days: no daylight saving). */
export const DAY_MS = 86_400_000;

/** The instant `days` whole days after `from`. */
export function daysAfter(from: Date, days: number): Date {
  return new Date(from.getTime() + days * DAY_MS);
}

/** Whole days from `then` to `now` (floor; 0 when a clock a little behind the database puts `then` later). */
export function wholeDaysSince(now: Date, then: Date): number;
export function wholeDaysSince(now: Date, then: Date | null): number | null;
export function wholeDaysSince(now: Date, then: Date | null): number | null {
  return then === null ? null : Math.max(0, Math.floor((now.getTime() - then.getTime()) / DAY_MS));
}
