# Multi-stage image for the demo apps on Node 24 (the LTS line). One image, two services: docker-compose.yml picks
# the entry point.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json nest-cli.json ./
COPY libs ./libs
COPY apps ./apps
# npm run build runs scripts/console-assets.js and scripts/prisma-generate.js (consumer-app's Prisma client).
COPY scripts ./scripts
RUN npm run build

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY schemas ./schemas
# producer-app's spool must outlive the container and be writable by the runtime user: docker-compose mounts a
# named volume here, which Docker fills from this directory (ownership included) the first time.
RUN mkdir -p /app/.spool && chown node:node /app/.spool
USER node
# consumer-app by default; docker-compose.yml overrides the command for producer-app.
CMD ["node", "dist/apps/consumer-app/apps/consumer-app/src/main.js"]
