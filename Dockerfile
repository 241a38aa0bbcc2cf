# syntax=docker/dockerfile:1
# One image for the control plane (default command) and the headless worker:
#   docker build -t qinglong-remote-worker:local .
#   control plane: docker run … qinglong-remote-worker:local
#   worker:        docker run -u 0:0 --cap-drop ALL --cap-add SETUID --cap-add SETGID --cap-add KILL --cap-add CHOWN \
#                    --security-opt no-new-privileges -e QL_PROFILE=worker … qinglong-remote-worker:local \
#                    bin/ql-worker
#   (the worker runs as root with those four capabilities only, and its tasks as qinglong-task: ADR 0031)
# docker-compose.yml and deploy/kubernetes/ run it; docs/operations.md explains both.

# Both stages must use the same image: the runtime stage reuses the native module built in `build`.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
# better-sqlite3 is a native module: node-gyp needs python3, make and g++ when no prebuilt binary fits.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# Install scripts off for every package, then only better-sqlite3's (its native build) is run.
RUN npm ci --ignore-scripts && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY apps ./apps
COPY libs ./libs
COPY migrations ./migrations
# The worker's bundle (ADR 0049) and the web console (ADR 0052): esbuild's binary comes in its platform
# package, no install script.
COPY scripts/bundle-worker.js scripts/build-console.js ./scripts/
RUN npm run build

FROM ${NODE_IMAGE} AS runtime
# tini as PID 1 forwards SIGTERM to node and reaps the scripts a worker starts. python3: the runtime
# of `python` tasks (sh and node are in the base image); without it a worker in this image declares
# no python runtime and a Python task never finds a worker.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini python3 \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production
# glibc malloc arenas: 2, not 8 per core (ADR 0024); the control plane's launchers all set it.
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies without install scripts: no compiler in this image; the one native module,
# better-sqlite3, is copied from the build stage (same base image, so the same Node ABI and libc).
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /app/node_modules/better-sqlite3/build/Release/better_sqlite3.node ./node_modules/better-sqlite3/build/Release/
COPY --from=build /app/dist ./dist
COPY deploy/docker/healthcheck.js ./deploy/docker/
# The worker's launcher: picks node's V8 flags from the container's memory limit (ADR 0046).
COPY bin/ql-worker ./bin/
# The user tasks run as (QL_WORKER_RUN_AS, ADR 0031): no home, no shell, owns nothing in the image.
# A worker refuses to start if it cannot switch to it (exit 2): it needs the capabilities above; to run
# tasks as the worker's own user instead, set QL_WORKER_RUN_AS= (empty; docs/operations.md says what a
# task can then reach).
RUN groupadd --system --gid 10001 qinglong-task \
  && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
     --shell /usr/sbin/nologin qinglong-task
ENV QL_WORKER_RUN_AS=10001:10001
# The PKI folder is the runtime user's (a control plane may write its dev PKI there). The worker's
# state folder is root's, the worker's user: a named volume mounted there starts as root's 0711, so
# tasks may pass through to their run folders but not list it or write in it.
RUN mkdir -p /var/lib/qinglong/pki /var/lib/qinglong/worker \
  && chown node:node /var/lib/qinglong/pki && chmod 0711 /var/lib/qinglong/worker
# The `node` user (uid 1000) of the official image: the control plane never runs as root. A worker
# container is started as root with four capabilities (docker-compose.yml, deploy/kubernetes).
USER node
EXPOSE 8080 8443
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--max-semi-space-size=4", "dist/apps/control-plane/src/main.js"]
