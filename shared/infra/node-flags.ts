/**
 * V8 flags every service process runs with: npm start's launcher passes them to the all-in-one process,
 * the Procfile writes them on each line (test/infra/procfile.test.ts keeps the two equal), and the
 * benches start the service with them.
 *
 * --max-semi-space-size=16 (MB; Node 20's default is 16 on 64-bit only for large heaps, usually far
 * less): an execute's objects live for the request, tens of milliseconds under load, longer than the
 * young generation's default size lets them. They were promoted to the old generation and the heap grew
 * to ~270 MB between major collections. With a 16 MB semi-space they die young: the embedded process
 * under 32 concurrent executes peaked at 284 MB RSS instead of 401 MB and spent less CPU per execute in
 * the collector (docs/benchmarks.md "Memory").
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=16"];
