// `npm start`: runs the all-in-one service (all-in-one.ts) as a child in a process group of its own and
// relays a stop to it once.
//
// Why a launcher: Ctrl-C in a terminal signals every process of the foreground group. Without it the
// embedded PostgreSQL and redis-server would receive that SIGINT too and stop under an API and workers
// still finishing their jobs. In a group of its own the service receives exactly one signal (from here)
// and stops its parts in order: ingress, workers, clients, database, then the embedded servers
// (shared/lifecycle.ts). The service also stops if this launcher disappears (its IPC channel closes), so
// a killed launcher leaves nothing behind. The exit code is the service's.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { SERVICE_NODE_FLAGS } from "../shared/infra/node-flags.js";

const SERVICE = fileURLToPath(new URL("./all-in-one.js", import.meta.url));

const service = spawn(process.execPath, [...SERVICE_NODE_FLAGS, SERVICE], {
  detached: true,
  stdio: ["ignore", "inherit", "inherit", "ipc"],
});

let relayed = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  // npm relays a signal to us as well as the terminal sending it, so one stop may arrive twice.
  process.on(signal, () => {
    if (relayed) return;
    relayed = true;
    service.kill("SIGTERM");
  });
}

service.once("error", (err) => {
  console.error(`could not start the service: ${err.message}`);
  process.exit(1);
});
service.once("exit", (code, signal) => {
  process.exit(code ?? (signal ? 1 : 0));
});
