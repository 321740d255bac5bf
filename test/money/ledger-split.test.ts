import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isRetryableDbError, platformSplit, retryTransient } from "../../shared/money/ledger/ledger.js";

describe("platformSplit (97/3)", () => {
  it("takes floor(amount × 3 / 100) as the fee and gives the seller the rest", () => {
    expect(platformSplit(1_000_000n)).toEqual({ feeMicros: 30_000n, sellerMicros: 970_000n });
    expect(platformSplit(20_000n)).toEqual({ feeMicros: 600n, sellerMicros: 19_400n });
    // 3 × 33 / 100 = 0.99: the fee rounds down, the seller keeps the remainder.
    expect(platformSplit(33n)).toEqual({ feeMicros: 0n, sellerMicros: 33n });
    expect(platformSplit(34n)).toEqual({ feeMicros: 1n, sellerMicros: 33n });
    expect(platformSplit(1n)).toEqual({ feeMicros: 0n, sellerMicros: 1n });
    expect(platformSplit(0n)).toEqual({ feeMicros: 0n, sellerMicros: 0n });
  });

  it("refuses a negative amount", () => {
    expect(() => platformSplit(-1n)).toThrow(/negative/);
  });

  it("parts always sum to the amount, the fee is the floor of 3 %, and neither part is negative", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 24n }), (amount) => {
        const { feeMicros, sellerMicros } = platformSplit(amount);
        expect(feeMicros + sellerMicros).toBe(amount);
        // floor: fee × 100 ≤ amount × 3 < (fee + 1) × 100
        expect(feeMicros * 100n <= amount * 3n).toBe(true);
        expect(amount * 3n < (feeMicros + 1n) * 100n).toBe(true);
        expect(feeMicros >= 0n && sellerMicros >= 0n).toBe(true);
        expect(sellerMicros >= feeMicros).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("agrees with a decimal floor on amounts that fit a double exactly", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), (amount) => {
        expect(platformSplit(BigInt(amount)).feeMicros).toBe(BigInt(Math.floor((amount * 3) / 100)));
      }),
    );
  });
});

describe("retryTransient", () => {
  const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code });

  it("runs a transaction again after a serialization failure or a deadlock", async () => {
    const codes = ["40001", "40P01"];
    let calls = 0;
    const result = await retryTransient(async () => {
      const code = codes[calls++];
      if (code) throw pgError(code);
      return "committed";
    });
    expect(result).toBe("committed");
    expect(calls).toBe(3);
  });

  it("does not retry other errors", async () => {
    let calls = 0;
    await expect(
      retryTransient(async () => {
        calls++;
        throw pgError("23505");
      }),
    ).rejects.toThrow(/23505/);
    expect(calls).toBe(1);
    expect(isRetryableDbError(pgError("40P01"))).toBe(true);
    expect(isRetryableDbError(pgError("55P03"))).toBe(true);
    expect(isRetryableDbError(new Error("plain"))).toBe(false);
    expect(isRetryableDbError(null)).toBe(false);
  });

  it("gives up after the last attempt and rethrows the database error", async () => {
    let calls = 0;
    await expect(
      retryTransient(async () => {
        calls++;
        throw pgError("40001");
      }, 3),
    ).rejects.toMatchObject({ code: "40001" });
    expect(calls).toBe(3);
  });
});
