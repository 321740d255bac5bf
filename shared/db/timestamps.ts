import pg from "pg";

// pg's reader for timestamptz values, with a fast path for the one shape PostgreSQL sends us.
//
// pg reads every timestamptz through postgres-date: a regular expression for the date and time, a
// second one for the zone, parseInt for each part. A page of a hundred listings carries six of them a
// row, and in a CPU profile of a kept catalog page that was ~6 % of the service's time, more than reading
// the rows' bytes (docs/benchmarks.md "The thirty-sixth round"). Every value PostgreSQL sends in its ISO
// output style for years 1000–9999 has one fixed shape, "YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]",
// read here by character positions. Anything else (BC, infinity, other years, another DateStyle) goes
// to postgres-date itself. The fast path computes the instant exactly as postgres-date does (its
// millisecond from 1000 × parseFloat of the fraction, Date.UTC, then the offset), so the two agree on
// every value: test/db/timestamps.test.ts compares them over generated values and the server's own.

const TIMESTAMPTZ = 1184;

type Reader = (text: string) => unknown;

/** postgres-date, as pg-types registered it: the reader of every value the fast path does not take. */
export const postgresDateReader = pg.types.getTypeParser(TIMESTAMPTZ, "text") as Reader;

const ZERO = 48;
const DASH = 45;
const PLUS = 43;
const COLON = 58;
const SPACE = 32;
const DOT = 46;

/** The two decimal digits at i as a number, or NaN when either is not a digit. */
function twoDigits(text: string, i: number): number {
  const a = text.charCodeAt(i) - ZERO;
  const b = text.charCodeAt(i + 1) - ZERO;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : Number.NaN;
}

/** The zone offset in ms from i to the end ("+05", "-03:30", "+05:53:28"), or NaN for another shape. */
function offsetMs(text: string, i: number): number {
  const sign = text.charCodeAt(i);
  if (sign !== PLUS && sign !== DASH) return Number.NaN;
  let seconds = twoDigits(text, i + 1) * 3600;
  let at = i + 3;
  for (let unit = 60; at < text.length && unit >= 1; unit /= 60) {
    if (text.charCodeAt(at) !== COLON) return Number.NaN;
    seconds += twoDigits(text, at + 1) * unit;
    at += 3;
  }
  if (at !== text.length) return Number.NaN;
  return (sign === DASH ? -seconds : seconds) * 1000;
}

/** A timestamptz as PostgreSQL's ISO output style writes it, as a Date (postgres-date's for any other). */
export function readTimestamptz(text: string): unknown {
  if (
    text.length < 22 ||
    text.charCodeAt(0) === ZERO ||
    text.charCodeAt(4) !== DASH ||
    text.charCodeAt(7) !== DASH ||
    text.charCodeAt(10) !== SPACE ||
    text.charCodeAt(13) !== COLON ||
    text.charCodeAt(16) !== COLON
  )
    return postgresDateReader(text);
  const year = twoDigits(text, 0) * 100 + twoDigits(text, 2);
  let at = 19;
  let ms = 0;
  if (text.charCodeAt(at) === DOT) {
    let end = at + 1;
    while (end < text.length && text.charCodeAt(end) >= ZERO && text.charCodeAt(end) <= ZERO + 9) end += 1;
    if (end === at + 1) return postgresDateReader(text);
    // The same arithmetic as postgres-date's (Date.UTC then truncates it), so the same millisecond.
    ms = 1000 * Number.parseFloat(text.slice(at, end));
    at = end;
  }
  const offset = offsetMs(text, at);
  const utc = Date.UTC(
    year,
    twoDigits(text, 5) - 1,
    twoDigits(text, 8),
    twoDigits(text, 11),
    twoDigits(text, 14),
    twoDigits(text, 17),
    ms,
  );
  // NaN when any part was not digits or the zone had another shape.
  if (Number.isNaN(utc - offset)) return postgresDateReader(text);
  return new Date(utc - offset);
}

pg.types.setTypeParser(TIMESTAMPTZ, "text", readTimestamptz);
