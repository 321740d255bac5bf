import { describe, expect, it } from "vitest";
import { AppError } from "../../shared/errors.js";
import { formatUsdc, parseUsdc } from "../../shared/kernel/money.js";

describe("parseUsdc", () => {
  it.each([
    [0, 0n],
    [0.000001, 1n],
    [1, 1_000_000n],
    [0.05, 50_000n],
    [12.345678, 12_345_678n],
    ["1.5", 1_500_000n],
    ["0.000001", 1n],
    ["12.345678", 12_345_678n],
    ["7", 7_000_000n],
  ])("parses %s exactly into %s micros", (value, expected) => {
    expect(parseUsdc(value, "/price")).toBe(expected);
  });

  it.each([
    [-1, "/price"],
    [1e-7, "/constraints/max_cost"],
    [0.1234567, "/amount"],
    ["abc", "/input/amount"],
    ["-0.5", "/x"],
    ["1.", "/x"],
    [".5", "/x"],
    ["", "/x"],
    [Number.NaN, "/x"],
    [Number.POSITIVE_INFINITY, "/x"],
  ])("rejects %s with SCHEMA_VALIDATION_FAILED at %s", (value, path) => {
    let thrown: unknown;
    try {
      parseUsdc(value, path);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(AppError);
    const error = thrown as AppError;
    expect(error.code).toBe("SCHEMA_VALIDATION_FAILED");
    const violations = error.details?.violations as { path: string; message: string }[];
    expect(violations[0]!.path).toBe(path);
    expect(violations[0]!.message).toEqual(expect.any(String));
  });
});

describe("formatUsdc", () => {
  it.each([
    [1_234_567n, "1.234567"],
    [0n, "0.000000"],
    [1n, "0.000001"],
    [50_000n, "0.050000"],
    [1_000_000n, "1.000000"],
    [12_345_678_000_000n, "12345678.000000"],
  ])("formats %s micros as %s", (micros, text) => {
    expect(formatUsdc(micros)).toBe(text);
  });

  it("round-trips through parseUsdc", () => {
    for (const micros of [0n, 1n, 999_999n, 1_000_001n, 123_456_789_012n])
      expect(parseUsdc(formatUsdc(micros), "/x")).toBe(micros);
  });
});
