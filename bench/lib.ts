/**
 * Helpers for the benchmarks: choosing the infrastructure, running the all-in-one service as a child
 * process, driving load with autocannon and accounting for CPU while it runs. One import for the
 * benchmarks; each concern lives in bench/lib/.
 */
export * from "./lib/cpu.js";
export * from "./lib/echo.js";
export * from "./lib/infra.js";
export * from "./lib/load.js";
export * from "./lib/memory.js";
export * from "./lib/output.js";
export * from "./lib/procfile.js";
export * from "./lib/redis.js";
export * from "./lib/series.js";
export * from "./lib/service.js";
