import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SERVICE_NODE_FLAGS } from "../../shared/infra/node-flags.js";
import { QUEUE_NAMES } from "../../shared/queue-names.js";
import { QUEUES } from "../../shared/queues.js";
import { WORKERS } from "../../workers/registry.js";

function readProcfile(): Map<string, string> {
  const text = readFileSync(new URL("../../Procfile", import.meta.url), "utf8");
  const processes = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const match = /^([A-Za-z0-9_-]+):\s*(.+?)\s*$/.exec(line);
    expect(match, `unparseable Procfile line: ${line}`).not.toBeNull();
    const [, name, command] = match!;
    expect(processes.has(name!), `duplicate Procfile process ${name}`).toBe(false);
    processes.set(name!, command!);
  }
  return processes;
}

/** Service processes run with the flags npm start gives the all-in-one process (shared/infra/node-flags.ts). */
const NODE = ["node", ...SERVICE_NODE_FLAGS].join(" ");

const sorted = (values: Iterable<string>) => [...values].sort();

describe("Procfile", () => {
  const processes = readProcfile();

  it("has one process per queue besides web and release", () => {
    const queueProcesses = [...processes.keys()].filter((name) => name !== "web" && name !== "release");
    expect(sorted(queueProcesses)).toEqual(sorted(QUEUE_NAMES));
  });

  it("runs each queue's worker with the queue's own name", () => {
    for (const queue of QUEUE_NAMES)
      expect(processes.get(queue)).toBe(`${NODE} dist/workers/main.js ${queue}`);
  });

  it("runs the API as web", () => {
    expect(processes.get("web")).toBe(`${NODE} dist/api/main.js`);
  });

  it("migrates on release", () => {
    expect(processes.get("release")).toBe("node dist/shared/db/migrate-cli.js latest");
  });
});

describe("queue registries agree with QUEUE_NAMES", () => {
  it("QUEUES has exactly the queue names", () => {
    expect(sorted(Object.keys(QUEUES))).toEqual(sorted(QUEUE_NAMES));
  });

  it("WORKERS has exactly the queue names, each a starter function", () => {
    expect(sorted(Object.keys(WORKERS))).toEqual(sorted(QUEUE_NAMES));
    for (const start of Object.values(WORKERS)) expect(typeof start).toBe("function");
  });
});
