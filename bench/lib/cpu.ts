import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";

// CPU accounting during a run (Linux /proc; elsewhere only the machine-wide figure is available).

export type ProcTicks = Map<number, { comm: string; user: number; sys: number }>;

export function clockTicksPerSecond(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;
  } catch {
    return 100;
  }
}

export const CLK_TCK = clockTicksPerSecond();

export function readProcs(): ProcTicks {
  const procs: ProcTicks = new Map();
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return procs;
  }
  for (const entry of entries) {
    try {
      procs.set(Number(entry), ticksFromStat(readFileSync(`/proc/${entry}/stat`, "utf8")));
    } catch {
      // The process ended between readdir and read.
    }
  }
  return procs;
}

/** One thread's CPU time in ticks and its context switches so far, or the sum over several threads. */
export interface ThreadTimes {
  user: number;
  sys: number;
  /** Times it gave up its core to wait (a read, a futex, epoll with nothing ready). */
  voluntary: number;
  /** Times the scheduler took its core while it could still run (another thread woke and was preferred). */
  involuntary: number;
}

/** The user and system ticks of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat text. */
function ticksFromStat(stat: string): { comm: string; user: number; sys: number } {
  // comm may contain spaces and parentheses; the fields after the last ")" are fixed.
  const close = stat.lastIndexOf(")");
  const fields = stat.slice(close + 2).split(" ");
  return {
    comm: stat.slice(stat.indexOf("(") + 1, close),
    user: Number(fields[11]),
    sys: Number(fields[12]),
  };
}

/** The context switches of a /proc/<pid>/status text; undefined when it names none. */
export function switchesFromProcStatus(
  text: string,
): Pick<ThreadTimes, "voluntary" | "involuntary"> | undefined {
  const voluntary = /^voluntary_ctxt_switches:\s+(\d+)$/m.exec(text);
  const involuntary = /^nonvoluntary_ctxt_switches:\s+(\d+)$/m.exec(text);
  if (!voluntary || !involuntary) return undefined;
  return { voluntary: Number(voluntary[1]), involuntary: Number(involuntary[1]) };
}

/** A process's main thread (the JavaScript event loop, for Node) apart from the sum of its other threads. */
export interface ProcessThreads {
  main: ThreadTimes;
  /** Every other thread alive when read (libuv's pool, V8's collector helpers…), summed. */
  others: ThreadTimes;
}

/** A process's threads' times (Linux /proc); undefined where /proc cannot tell, or the process is gone. */
export function readThreads(pid: number): ProcessThreads | undefined {
  const zero = (): ThreadTimes => ({ user: 0, sys: 0, voluntary: 0, involuntary: 0 });
  const threads = { main: zero(), others: zero() };
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  for (const tid of tids) {
    try {
      const { user, sys } = ticksFromStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"));
      const switches = switchesFromProcStatus(readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8"));
      if (!switches) continue;
      const into = Number(tid) === pid ? threads.main : threads.others;
      into.user += user;
      into.sys += sys;
      into.voluntary += switches.voluntary;
      into.involuntary += switches.involuntary;
    } catch {
      // The thread ended between readdir and read.
    }
  }
  return threads;
}

/** CPU time of all cores, in ticks: busy, steal, and the total they are shares of. */
export interface MachineTimes {
  busy: number;
  steal: number;
  total: number;
}

/**
 * The machine's times from /proc/stat's first line ("cpu  user nice system idle iowait irq softirq steal
 * …"): busy is user, nice, system, irq and softirq (the loopback traffic of a run is processed in
 * softirq); steal is time the hypervisor ran something else while a virtual core wanted to run; the
 * total adds idle and iowait. Undefined when the text has no such line.
 */
export function machineTimesFromProcStat(text: string): MachineTimes | undefined {
  const line = text.split("\n", 1)[0] ?? "";
  const fields = line.trim().split(/\s+/);
  if (fields[0] !== "cpu" || fields.length < 9) return undefined;
  const values = fields.slice(1, 9).map(Number);
  if (!values.every(Number.isFinite)) return undefined;
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = values;
  const busy = user + nice + system + irq + softirq;
  return { busy, steal, total: busy + steal + idle + iowait };
}

/** The machine's CPU times so far: /proc/stat on Linux; elsewhere os.cpus(), without softirq or steal. */
export function machineTimes(): MachineTimes {
  try {
    const times = machineTimesFromProcStat(readFileSync("/proc/stat", "utf8"));
    if (times) return times;
  } catch {
    // Not Linux: below.
  }
  let busy = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    busy += t.user + t.nice + t.sys + t.irq;
    total += t.user + t.nice + t.sys + t.irq + t.idle;
  }
  return { busy, steal: 0, total };
}

/** The machine as a whole during a run, beside what the meters attribute to processes. */
export interface MachineShares {
  machineBusyPct: number;
  /**
   * Share of the machine's time its hypervisor gave to others while our cores wanted to run (/proc/stat's
   * steal): a run with steal is slower for a reason outside every process measured.
   */
  machineStealPct: number;
}

/** CPU used during a run, in cores (1.0 = one core busy the whole time). */
export interface CpuUse extends MachineShares {
  service: number;
  /** The service's kernel (system) time, in cores: socket writes to PostgreSQL, Redis and clients. */
  serviceSys: number;
  postgres: number;
  redis: number;
  bench: number;
  /** Everything else on the machine (other processes, kernel threads), in cores. */
  other: number;
  /** The busiest other processes, so that a noisy neighbour is visible in the output. */
  busiestOthers: { comm: string; cores: number }[];
}

/** CPU used during a run by named groups of processes (e.g. every web process), in cores. */
export interface GroupCpuUse<G extends string> extends MachineShares {
  groups: Record<G, { cores: number; sysCores: number }>;
  postgres: number;
  redis: number;
  bench: number;
  other: number;
  busiestOthers: { comm: string; cores: number }[];
  /** The threads of the process the meter was asked to split (threadsOf), over the run. */
  threads?: ThreadUse;
}

/**
 * One process's threads over a run: CPU in seconds, switches in counts. A thread that ended during the
 * run is missing from `others` (its time with it); Node's threads live as long as the process.
 */
export interface ThreadUse {
  mainUserS: number;
  mainSysS: number;
  othersS: number;
  voluntary: number;
  involuntary: number;
}

function threadUse(before: ProcessThreads, after: ProcessThreads): ThreadUse {
  const seconds = (ticks: number) => ticks / CLK_TCK;
  const { main, others } = after;
  return {
    mainUserS: seconds(main.user - before.main.user),
    mainSysS: seconds(main.sys - before.main.sys),
    othersS: Math.max(0, seconds(others.user + others.sys - before.others.user - before.others.sys)),
    voluntary: main.voluntary + others.voluntary - before.main.voluntary - before.others.voluntary,
    involuntary: main.involuntary + others.involuntary - before.main.involuntary - before.others.involuntary,
  };
}

export interface CpuMeter<T = CpuUse> {
  stop(): T;
}

/**
 * Meters the processes of each group by pid (a group's cores are the sum over its pids), besides
 * PostgreSQL and Redis (by process name), this bench process and everything else on the machine; and,
 * with `threadsOf`, that one process's main thread apart from its others, with their context switches.
 */
export function startGroupCpuMeter<G extends string>(
  groups: Record<G, readonly number[]>,
  options: { threadsOf?: number } = {},
): CpuMeter<GroupCpuUse<G>> {
  const started = performance.now();
  const threadsBefore = options.threadsOf === undefined ? undefined : readThreads(options.threadsOf);
  const before = readProcs();
  const machineBefore = machineTimes();
  const groupOf = new Map<number, G>();
  for (const [group, pids] of Object.entries(groups) as [G, readonly number[]][])
    for (const pid of pids) groupOf.set(pid, group);
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const after = readProcs();
      const machineAfter = machineTimes();
      const threadsAfter = options.threadsOf === undefined ? undefined : readThreads(options.threadsOf);
      const cores = (ticks: number) => ticks / CLK_TCK / seconds;
      const used = Object.fromEntries(
        Object.keys(groups).map((g) => [g, { cores: 0, sysCores: 0 }]),
      ) as GroupCpuUse<G>["groups"];
      const use = { postgres: 0, redis: 0, bench: 0 };
      const others = new Map<string, number>();
      for (const [pid, now] of after) {
        const prior = before.get(pid);
        // A pid seen for the first time started during the run: all its time belongs to the run.
        const base = prior && prior.comm === now.comm ? prior : { user: 0, sys: 0 };
        const spent = cores(now.user - base.user + now.sys - base.sys);
        const group = groupOf.get(pid);
        if (group !== undefined) {
          used[group].cores += spent;
          used[group].sysCores += cores(now.sys - base.sys);
        } else if (pid === process.pid) use.bench += spent;
        else if (now.comm === "postgres") use.postgres += spent;
        else if (now.comm.startsWith("redis-server")) use.redis += spent;
        else others.set(now.comm, (others.get(now.comm) ?? 0) + spent);
      }
      const busy = machineAfter.busy - machineBefore.busy;
      const total = machineAfter.total - machineBefore.total;
      const busyCores = total > 0 ? (busy / total) * os.cpus().length : 0;
      const grouped = Object.values<{ cores: number }>(used).reduce((sum, g) => sum + g.cores, 0);
      const accounted = grouped + use.postgres + use.redis + use.bench;
      const busiestOthers = [...others]
        .filter(([, c]) => c >= 0.05)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([comm, c]) => ({ comm, cores: c }));
      return {
        groups: used,
        ...use,
        other: Math.max(0, busyCores - accounted),
        busiestOthers,
        machineBusyPct: total > 0 ? (100 * busy) / total : 0,
        machineStealPct: total > 0 ? (100 * (machineAfter.steal - machineBefore.steal)) / total : 0,
        threads: threadsBefore && threadsAfter && threadUse(threadsBefore, threadsAfter),
      };
    },
  };
}

/** The one-service meter: the service process against PostgreSQL, Redis, the bench and the rest. */
export function startCpuMeter(servicePid: number): CpuMeter {
  const meter = startGroupCpuMeter({ service: [servicePid] });
  return {
    stop() {
      const { groups, ...rest } = meter.stop();
      return { service: groups.service.cores, serviceSys: groups.service.sysCores, ...rest };
    },
  };
}
