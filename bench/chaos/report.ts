import { OP_KINDS } from "./load.js";
import type { ChaosResult } from "./run.js";

// One summary of a chaos run: faults injected by kind, operations by kind and outcome, payouts, and the
// four counts that must be zero.

export interface ChaosSummary {
  faults: Record<string, number>;
  operations: Record<string, Record<string, number>>;
  payouts: Record<string, number>;
  lost: number;
  doubleCharges: number;
  doublePayouts: number;
  violations: number;
}

/** The outcome of one operation as the summary names it: its final state, or the refusal's code. */
function outcomeOf(r: ChaosResult["operations"][number]): string {
  if (r.answer === "accepted") return r.final ?? "accepted";
  if (r.answer === "refused") return `refused ${r.code}`;
  return "unanswered";
}

export function summarise(result: ChaosResult): ChaosSummary {
  const faults: Record<string, number> = {};
  for (const [kind, n] of Object.entries(result.faults.kills)) faults[`SIGKILL ${kind}`] = n;
  faults["Redis restart"] = result.faults.redisRestarts;
  faults["PostgreSQL immediate restart"] = result.faults.postgresRestarts;
  for (const b of ["hang", "reset", "garbage"] as const) faults[`seller ${b}`] = result.faults.seller[b];
  const operations: Record<string, Record<string, number>> = {};
  for (const kind of OP_KINDS) operations[kind] = {};
  for (const r of result.operations) {
    const byOutcome = operations[r.kind]!;
    const outcome = outcomeOf(r);
    byOutcome[outcome] = (byOutcome[outcome] ?? 0) + 1;
  }
  const { findings } = result;
  return {
    faults,
    operations,
    payouts: result.payouts,
    lost: findings.lost.length,
    doubleCharges: findings.doubleCharges.length,
    doublePayouts: findings.doublePayouts.length,
    violations: findings.violations.length,
  };
}

/** The summary as text, for the terminal and the test log. */
export function formatSummary(result: ChaosResult): string {
  const s = summarise(result);
  const kills = Object.values(result.faults.kills).reduce((a, b) => a + b, 0);
  const lines = [
    `chaos run (seed ${result.profile.seed}): setup ${result.seconds.setup.toFixed(0)} s, load ${result.seconds.load.toFixed(0)} s, drain ${result.seconds.drain.toFixed(0)} s`,
    `faults injected (${kills} SIGKILLs):`,
    ...Object.entries(s.faults).map(([k, n]) => `  ${k.padEnd(32)} ${n}`),
    `operations (${result.operations.length}):`,
    ...Object.entries(s.operations).map(
      ([kind, outcomes]) =>
        `  ${kind.padEnd(14)} ${Object.entries(outcomes)
          .sort(([, a], [, b]) => b - a)
          .map(([o, n]) => `${o} ${n}`)
          .join(", ")}`,
    ),
    `payouts: ${
      Object.entries(s.payouts)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ") || "none"
    }`,
    `lost ${s.lost}, double charges ${s.doubleCharges}, double payouts ${s.doublePayouts}, violations ${s.violations}`,
  ];
  const details = [
    ...result.findings.lost.map((l) => `LOST ${l.kind} ${l.key}: ${l.detail}`),
    ...result.findings.doubleCharges.map((d) => `DOUBLE CHARGE ${d.subject}: ${d.detail}`),
    ...result.findings.doublePayouts.map((d) => `DOUBLE PAYOUT ${d.subject}: ${d.detail}`),
    ...result.findings.violations.map((v) => `VIOLATION ${v.check}: ${v.subject}: ${v.detail}`),
  ];
  if (Object.keys(result.stillOpen).length)
    details.push(`still open after the drain: ${JSON.stringify(result.stillOpen)}`);
  if (Object.keys(result.unexpectedExits).length)
    details.push(`processes that exited on their own: ${JSON.stringify(result.unexpectedExits)}`);
  return [...lines, ...details.slice(0, 50)].join("\n");
}
