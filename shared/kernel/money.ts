import { validationError } from "../errors.js";

/** Money inside the service is integer micro-USDC (6 decimals); decimals appear only at the API edge. */
export const MICROS_PER_USDC = 1_000_000n;

/** 1234567n → "1.234567" */
export function formatUsdc(micros: bigint): string {
  const sign = micros < 0n ? "-" : "";
  const abs = micros < 0n ? -micros : micros;
  return `${sign}${abs / MICROS_PER_USDC}.${(abs % MICROS_PER_USDC).toString().padStart(6, "0")}`;
}

/**
 * Parses a USDC amount from the API edge (a JSON number or decimal string) into micros, exactly: no
 * floating-point arithmetic, at most 6 decimals, never negative.
 */
export function parseUsdc(value: number | string, path: string): bigint {
  const text = typeof value === "number" ? value.toString() : value;
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) {
    throw validationError("invalid USDC amount", [
      { path, message: "must be a non-negative amount with at most 6 decimals" },
    ]);
  }
  return BigInt(match[1]!) * MICROS_PER_USDC + BigInt((match[2] ?? "").padEnd(6, "0"));
}

/** node-pg returns int8 as a string; money columns become bigint here, deliberately. */
export function micros(column: string | number | bigint): bigint {
  return BigInt(column);
}
