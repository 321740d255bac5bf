import type { ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";

// Children of the chaos run never outlive it: whatever is still registered when this process exits (a
// test runner tearing the worker down at a timeout, an uncaught error, a signal) is SIGKILLed and its
// data removed, synchronously, from the 'exit' handler.

const children = new Set<ChildProcess>();
const dirs = new Set<string>();
let installed = false;

function reap(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}

function install(): void {
  if (installed) return;
  installed = true;
  process.once("exit", reap);
}

/** Kills `child` when this process exits, unless it has ended by then. */
export function reapOnExit(child: ChildProcess): void {
  install();
  children.add(child);
  child.once("exit", () => children.delete(child));
}

/** Removes `dir` when this process exits, unless forgotten first. */
export function removeOnExit(dir: string): () => void {
  install();
  dirs.add(dir);
  return () => dirs.delete(dir);
}
