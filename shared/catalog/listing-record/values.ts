import { objectLiteralFunction } from "../../kernel/object-literal.js";

/**
 * Small value helpers for the listing record. The one rule they carry (DESIGN §4): a value without
 * evidence is null, and a sibling `<key>_null_reason` says why. The reason key is present only when the
 * value is null, so a reader never sees a stale reason next to a real number.
 */

/** `{ [key]: value }` plus `{ [key_null_reason]: reason }` when the value is null. */
export type Explained<K extends string, V> = { [P in K]: V | null } & {
  [P in `${K}_null_reason`]?: string;
};

type Literal = (value: unknown) => Record<string, unknown>;

/** Per key, a function returning an object literal of that key (and its reason key): see explained. */
const withValue = new Map<string, Literal>();
const withReason = new Map<string, Literal>();

/** Makes and keeps the literal's function (shared/kernel/object-literal.ts). */
function remember(cache: Map<string, Literal>, key: string, properties: [string, string][]): Literal {
  const literal = objectLiteralFunction<Literal>(["v"], properties);
  cache.set(key, literal);
  return literal;
}

/**
 * The value under its key, or null under its key and the reason under `<key>_null_reason`. Built by an
 * object literal made once per key (the keys are the record's field names, a fixed set): a computed
 * key (`{ [key]: value }`) made each object one property at a time, and a page of a hundred records,
 * about fifty of these each, spent a third of its time building and spreading them
 * (docs/benchmarks.md "The thirty-sixth round").
 */
export function explained<K extends string, V>(
  key: K,
  value: V | null | undefined,
  reason: string,
): Explained<K, V> {
  if (value === null || value === undefined) {
    const literal =
      withReason.get(key) ??
      remember(withReason, key, [
        [key, "null"],
        [`${key}_null_reason`, "v"],
      ]);
    return literal(reason) as Explained<K, V>;
  }
  const literal = withValue.get(key) ?? remember(withValue, key, [[key, "v"]]);
  return literal(value) as Explained<K, V>;
}

const NO_REASON: Readonly<Record<string, string>> = Object.freeze({});
const reasonOnly = new Map<string, Literal>();

/**
 * The reason alone: `{ <key>_null_reason: reason }` when the value is null, else nothing. For the first
 * field of an object literal, written `{ key: value, ...nullReason("key", value, reason), … }` where the
 * rest use explained: Node 20's V8 builds a literal that begins with a spread and adds keys by a slow
 * copy (~0.7 µs a literal, every later spread into it slow as well, and a new hidden class each call),
 * and one that begins with a plain property in ~30 ns (docs/benchmarks.md "The thirty-seventh round").
 */
export function nullReason<K extends string>(
  key: K,
  value: unknown,
  reason: string,
): { [P in `${K}_null_reason`]?: string } {
  type Reason = { [P in `${K}_null_reason`]?: string };
  if (value !== null && value !== undefined) return NO_REASON as Reason;
  const literal = reasonOnly.get(key) ?? remember(reasonOnly, key, [[`${key}_null_reason`, "v"]]);
  return literal(reason) as Reason;
}

/** ISO 8601 or null; Date columns arrive as Date from node-pg. */
export function isoOrNull(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

/** part/whole as a percentage with one decimal, or null when there is no basis (whole = 0). */
export function percent(part: number, whole: number): number | null {
  if (whole <= 0) return null;
  return Math.round((part / whole) * 1000) / 10;
}

/** part/whole as a ratio with four decimals, or null when there is no basis (whole = 0). */
export function ratio(part: number, whole: number): number | null {
  if (whole <= 0) return null;
  return Math.round((part / whole) * 10_000) / 10_000;
}

/** A number rounded to one decimal; latency averages come from SQL with arbitrary precision. */
export function oneDecimal(value: number | null): number | null {
  return value === null ? null : Math.round(value * 10) / 10;
}

/** 0/1 integers, as the spec's read-time table serves featured, safe_to_retry and the other flags. */
export function flag(value: boolean): 0 | 1 {
  return value ? 1 : 0;
}

/** The first occurrence of each string, order kept: blocker and alias lists must not repeat. */
export function unique(values: Iterable<string>): string[] {
  return [...new Set(values)];
}
