# syntax=docker/dockerfile:1
# Agent Market: one image for every Procfile process (docs/operations.md "Containers"). The command
# picks the process: `node dist/api/main.js` (web), `node dist/workers/main.js <queue>`, or
# `node dist/shared/db/migrate-cli.js latest` (release). Not built in CI (no container engine there);
# test/infra/deployment.test.ts checks that docker-compose.yml runs exactly the Procfile's processes.

# ---- build: install everything, compile, then drop the dev dependencies
FROM node:20-bookworm-slim AS build
WORKDIR /app
ENV npm_config_audit=false npm_config_fund=false
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
RUN npm run build && npm prune --omit=dev

# ---- runtime: the compiled service and production node_modules, run as an unprivileged user
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json /app/Procfile ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
# The `node` user (uid 1000) of the official image: no root at run time, nothing writable but /tmp.
USER node
EXPOSE 3000
# No HEALTHCHECK here: the one image runs the web process and the workers, which answer on different
# ports; docker-compose.yml declares each service's own check.
CMD ["node", "--max-semi-space-size=16", "--max-old-space-size=256", "dist/api/main.js"]
