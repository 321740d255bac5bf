import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { reapOnExit } from "./reaper.js";

// The Procfile's processes as OS processes, each restarted when it dies (what a process manager does),
// so the fault schedule can SIGKILL any of them at any moment.

export interface ProcessSpec {
  /** e.g. "web-1", "executions-2". */
  name: string;
  /** The Procfile process it runs: web, executions, … */
  kind: string;
  script: string;
  args: string[];
  env: Record<string, string>;
}

interface Managed {
  spec: ProcessSpec;
  child: ChildProcess | undefined;
  /** When the running child said it was ready (undefined while it starts). */
  readyAt: number | undefined;
  /** The last lines of output, for a failure message. */
  tail: string[];
  starts: number;
  unexpectedExits: number;
}

const TAIL_LINES = 40;
/** How many of them a process's unexpected exit prints at once. */
const TAIL_ON_EXIT = 10;
/** The info lines that say a process is up: the API listens, the workers took their queues. */
const READY = /"msg":"(api listening|workers started)"/;
const RESTART_DELAY_MS = 300;

export class Supervisor {
  private readonly managed = new Map<string, Managed>();
  private stopping = false;

  constructor(private readonly log: (m: string) => void) {}

  start(spec: ProcessSpec): void {
    if (!existsSync(spec.script)) throw new Error(`${spec.script} is missing: build first (npm run build)`);
    const m: Managed = {
      spec,
      child: undefined,
      readyAt: undefined,
      tail: [],
      starts: 0,
      unexpectedExits: 0,
    };
    this.managed.set(spec.name, m);
    this.spawn(m);
  }

  private spawn(m: Managed): void {
    m.starts += 1;
    m.readyAt = undefined;
    const child = spawn(process.execPath, [m.spec.script, ...m.spec.args], {
      env: { ...process.env, ...m.spec.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    m.child = child;
    reapOnExit(child);
    const keep = (d: Buffer) => {
      for (const line of d.toString().split("\n")) {
        if (!line.trim()) continue;
        if (m.readyAt === undefined && m.child === child && READY.test(line)) m.readyAt = Date.now();
        // Request and job lines at info level are many; the tail keeps what explains a failure.
        if (!/"level":30/.test(line)) m.tail.push(line);
      }
      if (m.tail.length > TAIL_LINES) m.tail.splice(0, m.tail.length - TAIL_LINES);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    child.once("exit", (code, signal) => {
      if (m.child === child) m.child = undefined;
      if (this.stopping) return;
      if (signal !== "SIGKILL") {
        m.unexpectedExits += 1;
        // A crash is a finding: say why with its last lines, read to the end once its pipes close
        // (they may still hold output when the exit comes).
        child.once("close", () =>
          this.log(
            `${m.spec.name} exited (${code ?? signal}); restarting. Its last lines:\n` +
              m.tail.slice(-TAIL_ON_EXIT).join("\n"),
          ),
        );
      }
      setTimeout(() => {
        if (!this.stopping && m.child === undefined) this.spawn(m);
      }, RESTART_DELAY_MS);
    });
  }

  names(kinds?: readonly string[]): string[] {
    return [...this.managed.values()]
      .filter((m) => !kinds || kinds.includes(m.spec.kind))
      .map((m) => m.spec.name);
  }

  /**
   * SIGKILLs the named process if it has been ready (listening, or holding its queue) for at least
   * `minUpMs`; true when a signal was sent. It is restarted shortly after.
   */
  kill(name: string, minUpMs = 0): boolean {
    const m = this.managed.get(name);
    const child = m?.child;
    if (!m || !child || child.exitCode !== null || child.signalCode !== null) return false;
    if (m.readyAt === undefined || Date.now() - m.readyAt < minUpMs) return false;
    return child.kill("SIGKILL");
  }

  kindOf(name: string): string {
    return this.managed.get(name)!.spec.kind;
  }

  /** True when every process has a live child. */
  allRunning(): boolean {
    return [...this.managed.values()].every(
      (m) => m.child && m.child.exitCode === null && !m.child.signalCode,
    );
  }

  /** Processes that exited without being killed by us (a crash is a finding). */
  unexpectedExits(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const m of this.managed.values()) if (m.unexpectedExits) out[m.spec.name] = m.unexpectedExits;
    return out;
  }

  output(name: string): string {
    return this.managed.get(name)?.tail.join("\n") ?? "";
  }

  allOutput(): string {
    return [...this.managed.values()].map((m) => `--- ${m.spec.name} ---\n${m.tail.join("\n")}`).join("\n");
  }

  /** SIGKILLs everything and keeps it down; resolves once every child has exited. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    const exits: Promise<void>[] = [];
    for (const m of this.managed.values()) {
      const child = m.child;
      if (!child || child.exitCode !== null || child.signalCode !== null) continue;
      exits.push(new Promise((resolve) => child.once("exit", () => resolve())));
      child.kill("SIGKILL");
    }
    await Promise.all(exits);
  }
}

/** Runs a compiled entry point to its end (the Procfile's release step); rejects on a non-zero exit. */
export async function runOnce(script: string, args: string[], env: Record<string, string>): Promise<void> {
  const child = spawn(process.execPath, [script, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`${script} ${args.join(" ")} exited ${code}:\n${output}`);
}
