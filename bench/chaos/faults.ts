import type { ChaosCluster } from "./cluster.js";
import type { Supervisor } from "./processes.js";
import type { Random } from "./random.js";

// The fault schedule: SIGKILLs of random API and worker processes at random moments (each restarted by
// the supervisor), one Redis restart and one PostgreSQL immediate-mode restart in the middle of the load.

export const KILLABLE = ["web", "executions", "settlement-confirmations", "payouts"] as const;

export interface FaultCounts {
  /** SIGKILLs delivered, by Procfile process. */
  kills: Record<string, number>;
  redisRestarts: number;
  postgresRestarts: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long after a load of `spanMs` the kills still due may be delivered (see injectFaults). */
export function lateWindowMs(spanMs: number): number {
  return Math.max(30_000, 2 * spanMs);
}

/**
 * Runs the schedule until `until` (epoch ms); resolves with what was injected. `kills` is spread evenly,
 * with jitter, so a process is killed while it starts, while it is idle and while it holds work.
 */
export async function injectFaults(opts: {
  supervisor: Supervisor;
  cluster: ChaosCluster;
  random: Random;
  until: number;
  kills: number;
  /** A process is killed only once it has been ready this long, so that it does some work between kills. */
  minUpMs: number;
  log: (m: string) => void;
}): Promise<FaultCounts> {
  const { supervisor, cluster, random, until, log } = opts;
  const counts: FaultCounts = { kills: {}, redisRestarts: 0, postgresRestarts: 0 };
  const start = Date.now();
  const span = until - start;
  const redisAt = start + span * 0.35;
  const postgresAt = start + span * 0.65;
  const gap = span / Math.max(1, opts.kills);
  const names = supervisor.names(KILLABLE);
  let delivered = 0;
  // Kills not delivered by the end are delivered after it. How many fit into the span depends on the
  // machine, not on us: a killed process is eligible again only once it has restarted and been ready for
  // `minUpMs`, and on a slow machine a restart takes several seconds (six processes gave 28-29 kills in
  // 60 + 30 s on one, 27 in 60 + 60 s on another while the rest of the suite ran). So the late window
  // scales with the span, twice it, rather than being a fixed 30 s. Attempts stay a gap apart there too:
  // retrying every quarter of a second killed each process as soon as it was eligible, and a client of
  // the load got no answer from either web process for two minutes.
  const lateUntil = until + lateWindowMs(span);
  while (Date.now() < until || (delivered < opts.kills && Date.now() < lateUntil)) {
    if (counts.redisRestarts === 0 && Date.now() >= redisAt) {
      log("fault: redis restart (SIGKILL, respawn on its append-only file)");
      await cluster.redis.restart();
      counts.redisRestarts += 1;
    }
    if (counts.postgresRestarts === 0 && Date.now() >= postgresAt) {
      log("fault: PostgreSQL immediate-mode restart");
      await cluster.postgres.restartImmediate();
      counts.postgresRestarts += 1;
    }
    if (delivered < opts.kills) {
      // A live process of a random name; a process still restarting is skipped for another.
      for (const name of shuffled(names, random)) {
        if (supervisor.kill(name, opts.minUpMs)) {
          const kind = supervisor.kindOf(name);
          counts.kills[kind] = (counts.kills[kind] ?? 0) + 1;
          delivered += 1;
          break;
        }
      }
    }
    await sleep(Math.max(20, gap * (0.3 + random.next() * 1.4)));
  }
  // Faults scheduled but not reached before the end (a short run) still happen, before the drain.
  if (counts.redisRestarts === 0) {
    await cluster.redis.restart();
    counts.redisRestarts += 1;
  }
  if (counts.postgresRestarts === 0) {
    await cluster.postgres.restartImmediate();
    counts.postgresRestarts += 1;
  }
  return counts;
}

function shuffled<T>(items: readonly T[], random: Random): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
