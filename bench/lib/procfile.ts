import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type Service, startChild } from "./service.js";

// The Procfile's processes as bench children: the commands are read from the Procfile itself, so a
// bench runs what a deployment runs.

const PROCFILE = fileURLToPath(new URL("../../../Procfile", import.meta.url));

export interface ProcfileCommand {
  /** The entry point, relative to the repository root (e.g. "dist/api/main.js"). */
  script: string;
  args: string[];
  /** Node flags before the script (the Procfile's SERVICE_NODE_FLAGS). */
  nodeArgs: string[];
}

/** The Procfile's `name: node <script> <args…>` lines by name. */
export function readProcfile(path = PROCFILE): Map<string, ProcfileCommand> {
  const commands = new Map<string, ProcfileCommand>();
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const match = /^([\w-]+):\s*node((?:\s+--\S+)*)\s+(\S+)(.*)$/.exec(line.trim());
    if (!match) continue;
    const words = (text: string) => text.trim().split(/\s+/).filter(Boolean);
    commands.set(match[1]!, { nodeArgs: words(match[2]!), script: match[3]!, args: words(match[4]!) });
  }
  return commands;
}

/** One Procfile process's command; throws when the Procfile has no such line. */
export function procfileCommand(name: string): ProcfileCommand {
  const command = readProcfile().get(name);
  if (!command) throw new Error(`the Procfile has no "${name}: node …" line`);
  return command;
}

/** Starts a Procfile process (web, executions, …) as a child in its own process group. */
export function startProcfileProcess(
  name: string,
  env: Record<string, string>,
  options: { port?: number; onLine?: (line: string) => void } = {},
): Service {
  return startChild({ ...procfileCommand(name), ...options, env });
}

/** The Procfile's `release` step (the migrations), run to its end; throws with its output on failure. */
export async function runRelease(env: Record<string, string>, timeoutMs = 120_000): Promise<void> {
  const release = startProcfileProcess("release", env);
  const timer = setTimeout(() => release.killNow(), timeoutMs);
  const code = await release.whenExited();
  clearTimeout(timer);
  if (code !== 0) throw new Error(`release exited ${code}:\n${release.lines().slice(-30).join("\n")}`);
}
