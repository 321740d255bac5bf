/**
 * V8 flags every service process runs with: npm start's launcher passes them to the all-in-one process,
 * the Procfile writes them on each line (test/infra/procfile.test.ts keeps the two equal), and the
 * benches start the service with them. To change them for a deployment, change them here and in the
 * Procfile (command-line flags win over NODE_OPTIONS, so NODE_OPTIONS cannot lower or raise them).
 *
 * Why (docs/benchmarks.md "Soak"): an execute's objects live for its request, tens of milliseconds
 * under load. With V8's defaults they outlived the small young generation, were promoted, and the old
 * generation grew to 330 MB of mostly garbage between major collections: RSS swung between 260 and
 * 440 MB under 32 concurrent executes, although the live heap after a collection is ~110 MB.
 * - --max-semi-space-size=16 (MB): a young generation large enough that request objects die in it.
 * - --max-old-space-size=256 (MB): V8 sizes its collection thresholds from this limit, so it collects
 *   well before it; RSS then peaked at 211 MB over 45 s at c=32 (401 MB with neither flag), with no
 *   more CPU per execute. The cost: a live heap above 256 MB ends the process (heap out of memory),
 *   which the durable design survives (recovery sweeps), but a deployment whose live set is larger
 *   (huge provider outputs at high concurrency) must raise it.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=16", "--max-old-space-size=256"];
