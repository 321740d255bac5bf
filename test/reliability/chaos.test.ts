import { expect, it } from "vitest";
import { formatSummary, summarise } from "../../bench/chaos/report.js";
import { runChaos, SHORT_PROFILE, worstCaseMs } from "../../bench/chaos/run.js";

// The short chaos run (docs/reliability.md "Chaos"; the long one is `npm run chaos`): the Procfile's
// processes as OS processes on a PostgreSQL and a Redis of the run's own, free and paid calls, x402
// payments, deposits and payouts on a local chain, while processes are SIGKILLed, Redis and PostgreSQL
// restart and sellers hang, reset and answer garbage. After the drain nothing may be lost, charged twice
// or paid out twice, and every invariant must hold.

it(
  "loses nothing, charges and pays out once, and keeps every invariant under kills and restarts",
  async () => {
    const log: string[] = [];
    const result = await runChaos(SHORT_PROFILE, (m) => log.push(m));
    const summary = summarise(result);
    const text = formatSummary(result);
    console.log(`${log.join("\n")}\n${text}`);

    // The faults happened.
    const kills = Object.values(result.faults.kills).reduce((a, b) => a + b, 0);
    expect(kills, text).toBeGreaterThanOrEqual(SHORT_PROFILE.kills);
    expect(Object.keys(result.faults.kills).sort(), text).toEqual(
      ["executions", "payouts", "settlement-confirmations", "web"].sort(),
    );
    expect(result.faults.redisRestarts, text).toBe(1);
    expect(result.faults.postgresRestarts, text).toBe(1);
    for (const b of ["hang", "reset", "garbage"] as const)
      expect(result.faults.seller[b], text).toBeGreaterThan(0);
    // Every kind of operation ran, and paid work reached the chain.
    for (const [kind, outcomes] of Object.entries(summary.operations))
      expect(Object.keys(outcomes).length, `${kind}\n${text}`).toBeGreaterThan(0);
    expect(summary.payouts.confirmed ?? 0, text).toBeGreaterThan(0);

    // And nothing went wrong.
    expect(summary.lost, text).toBe(0);
    expect(summary.doubleCharges, text).toBe(0);
    expect(summary.doublePayouts, text).toBe(0);
    expect(summary.violations, `${text}\n${log.join("\n")}`).toBe(0);
    expect(result.stillOpen, text).toEqual({});
    // Room for the worst case to report rather than time out.
  },
  worstCaseMs(SHORT_PROFILE),
);
