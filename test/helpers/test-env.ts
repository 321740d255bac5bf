// Defaults for the test run: the machine's PostgreSQL and Redis. .ci/run and developers may override
// them with TEST_DATABASE_URL / TEST_REDIS_URL.
export const TEST_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/agentmarket_test";
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Connection URL of another database on the same server. */
export function databaseUrl(name: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}
