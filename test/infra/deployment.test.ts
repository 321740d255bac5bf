import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

// The container files (docs/operations.md "Containers"). No container engine runs here, so the image
// is not built; these checks keep the files in step with the Procfile and the rules they promise.

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), "utf8");

function procfile(): Map<string, string> {
  const entries = read("Procfile")
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("#"))
    .map((l) => /^([A-Za-z0-9_-]+):\s*(.+?)\s*$/.exec(l)!)
    .map((m) => [m[1]!, m[2]!] as const);
  return new Map(entries);
}

describe("docker-compose.yml", () => {
  const compose = parse(read("docker-compose.yml"), { merge: true }) as {
    services: Record<string, { command?: string[]; image?: string; depends_on?: Record<string, unknown> }>;
  };
  const app = Object.entries(compose.services).filter(([, s]) => s.image === "agentmarket:latest");

  it("runs exactly the Procfile's processes, each as its own service with the Procfile's command", () => {
    const processes = procfile();
    expect(app.map(([name]) => name).sort()).toEqual([...processes.keys()].sort());
    for (const [name, service] of app) expect(service.command?.join(" "), name).toBe(processes.get(name));
  });

  it("runs Redis with noeviction and AOF, and starts the processes after the release migrated", () => {
    const redis = compose.services.redis!.command!.join(" ");
    expect(redis).toContain("--maxmemory-policy noeviction");
    expect(redis).toContain("--appendonly yes");
    for (const [name, service] of app.filter(([n]) => n !== "release")) {
      expect(service.depends_on?.release, name).toEqual({ condition: "service_completed_successfully" });
    }
  });
});

describe("Dockerfile", () => {
  const text = read("Dockerfile");
  it("builds in one stage and runs as a non-root user in another", () => {
    const stages = [...text.matchAll(/^FROM \S+ AS (\w+)$/gm)].map((m) => m[1]);
    expect(stages).toEqual(["build", "runtime"]);
    const runtime = text.slice(text.indexOf("AS runtime"));
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).not.toMatch(/^RUN npm/m);
    expect(text.slice(0, text.indexOf("AS runtime"))).toMatch(/^RUN npm ci$/m);
  });
});
