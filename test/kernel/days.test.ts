import { describe, expect, it } from "vitest";
import { DAY_MS, daysAfter, wholeDaysSince } from "../../shared/kernel/days.js";

describe("whole days", () => {
  const t = new Date("2026-11-01T12:00:00.000Z");

  it("counts whole days since, floored, never below zero, null for never", () => {
    expect(wholeDaysSince(daysAfter(t, 3), t)).toBe(3);
    expect(wholeDaysSince(new Date(t.getTime() + 3 * DAY_MS - 1), t)).toBe(2);
    // A clock a little behind the database's stamp.
    expect(wholeDaysSince(new Date(t.getTime() - 5_000), t)).toBe(0);
    expect(wholeDaysSince(t, null)).toBeNull();
  });

  it("adds whole UTC days", () => {
    expect(daysAfter(t, 30).toISOString()).toBe("2026-12-01T12:00:00.000Z");
    expect(daysAfter(new Date("2026-03-28T00:00:00.000Z"), 1).toISOString()).toBe("2026-03-29T00:00:00.000Z");
  });
});
