import { readFileSync } from 'fs';
import { basename, dirname, join } from 'path';
import { installLine, MissingPeerError, type MissingPeer } from './errors/missing-peer.error';

/**
 * The optional peer dependencies the library loads with `require()` only when a configuration uses them, with the
 * versions it supports: its package.json's `peerDependencies` (a unit spec keeps the two equal). What the
 * configuration makes certain is checked at boot (MissingPeerError names the package, the range, the install line):
 * - protobufjs: handlers and declared topics of format `protobuf` (KafkaExactlyOnceExplorer); a `json` handler whose
 *   subject's latest schema is Protobuf (checkReaders). A Protobuf writer a record brings waits for it a while when
 *   the topic's subject holds it, else the record is dead-lettered naming it (RegistrySchemas.missingPeerFailure);
 * - ajv: topics written as JSON Schema (explorer); a handler whose subject's latest schema is a JSON Schema
 *   (checkReaders). A JSON Schema writer a record brings: as for protobufjs;
 * - class-validator: a handler's `validate` given as a DTO class (its validator, built at boot); class-transformer,
 *   when installed, builds the DTO (without it, the event's own fields: no nested DTOs);
 * - prom-client: `metrics` (KafkaExactlyOnceMetrics); @opentelemetry/api: spans, when installed (nothing to declare);
 * - @nestjs-cls/transactional: joined when the application registered it (nothing to declare);
 * - @prisma/adapter-pg and drizzle-orm: `prismaDatabase(...)` and `drizzleDatabase(...)`, when called;
 * - @platformatic/kafka: `driver: 'platformatic'` (the module's boot).
 */
export const OPTIONAL_PEERS = {
  protobufjs: '^7.0.0',
  ajv: '^8.0.0',
  'class-validator': '>=0.14.0',
  'class-transformer': '>=0.5.0',
  'prom-client': '^15.0.0',
  '@opentelemetry/api': '^1.3.0',
  '@nestjs-cls/transactional': '^3.0.0',
  '@prisma/adapter-pg': '^7.0.0',
  'drizzle-orm': '>=0.36.0 <1.0.0',
  '@platformatic/kafka': '^2.12.1',
} as const;

export type OptionalPeer = keyof typeof OPTIONAL_PEERS;

/** An optional peer a configuration needs, and what needs it (`OrdersHandler.onOrder reads format protobuf`). */
export interface PeerNeed {
  peer: OptionalPeer;
  neededBy: string;
}

/** The install line of one optional peer, in the range the library supports: `npm install "protobufjs@^7.0.0"`. */
export function installLineOf(peer: OptionalPeer): string {
  return installLine([{ name: peer, range: OPTIONAL_PEERS[peer] }]);
}

/**
 * Throws MissingPeerError when a package of `needs` cannot be loaded from the library, or is installed in a version
 * outside the range the library supports; every such package in one error, with one install line. `from`: the folder
 * the packages are resolved from (default: the library's, as its lazy `require()`s resolve them).
 */
export function assertPeersInstalled(needs: readonly PeerNeed[], from?: string): void {
  const missing = new Map<OptionalPeer, MissingPeer>();
  for (const { peer, neededBy } of needs) {
    const found = missing.get(peer);
    if (found) {
      if (!found.neededBy.includes(neededBy)) found.neededBy.push(neededBy);
      continue;
    }
    const installed = installedVersion(peer, from);
    if (installed !== undefined && (installed === '' || satisfies(installed, OPTIONAL_PEERS[peer]))) continue;
    missing.set(peer, { name: peer, range: OPTIONAL_PEERS[peer], installed, neededBy: [neededBy] });
  }
  if (missing.size > 0) throw new MissingPeerError([...missing.values()]);
}

/**
 * `require(peer)`, or MissingPeerError naming `neededBy` when it is not installed (or not in a supported version):
 * for a peer a configuration needs, loaded at boot.
 */
export function requirePeer<T>(peer: OptionalPeer, neededBy: string): T {
  assertPeersInstalled([{ peer, neededBy }]);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(peer) as T;
}

/**
 * The version of `peer` the library would load (resolved from here, as its lazy `require()`s are, or from `from`):
 * undefined when it cannot be found; '' when it is there but no package.json of it says a version. Read from the
 * package.json nearest above its entry point that names the package, with fs: a package's `exports` may leave its
 * package.json out (drizzle-orm's and @prisma/adapter-pg's do), and a folder of its own may hold one without a name
 * (`dist/cjs/package.json` saying only its module type).
 */
export function installedVersion(peer: OptionalPeer, from?: string): string | undefined {
  let entry: string;
  try {
    entry = from === undefined ? require.resolve(peer) : require.resolve(peer, { paths: [from] });
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
  for (let dir = dirname(entry); ; dir = dirname(dir)) {
    const manifest = readManifest(join(dir, 'package.json'));
    if (manifest?.name === peer) return typeof manifest.version === 'string' ? manifest.version : '';
    // Never past the package's own node_modules folder (another package's manifest), nor the file system's root.
    if (basename(dir) === 'node_modules' || dirname(dir) === dir) return '';
  }
}

function readManifest(path: string): { name?: unknown; version?: unknown } | undefined {
  try {
    const manifest: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return manifest !== null && typeof manifest === 'object' ? manifest : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether `version` is in `range`, for the forms of the library's peerDependencies: comparators (`>=0.36.0 <1.0.0`),
 * carets (`^7.0.0`) and alternatives (`||`). A version that is not x.y.z (a prerelease is read by its x.y.z) or a
 * comparator of another form is not refused.
 */
export function satisfies(version: string, range: string): boolean {
  const v = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  if (!v) return true;
  const have = [Number(v[1]), Number(v[2]), Number(v[3])];
  const compare = (want: number[]) => have[0] - want[0] || have[1] - want[1] || have[2] - want[2];
  return range.split('||').some((set) =>
    set
      .trim()
      .split(/\s+/)
      .every((comparator) => {
        const c = /^(\^|>=|<=|>|<|=)?v?(\d+)\.(\d+)\.(\d+)$/.exec(comparator);
        if (!c) return true;
        const want = [Number(c[2]), Number(c[3]), Number(c[4])];
        const order = compare(want);
        switch (c[1]) {
          case '^':
            // Same leftmost non-zero part: ^7.1.0 is 7.x from 7.1.0, ^0.5.0 is 0.5.x.
            return order >= 0 && (want[0] > 0 ? have[0] === want[0] : want[1] > 0 ? have[0] === 0 && have[1] === want[1] : have[0] === 0 && have[1] === 0 && have[2] === want[2]);
          case '>=':
            return order >= 0;
          case '<=':
            return order <= 0;
          case '>':
            return order > 0;
          case '<':
            return order < 0;
          default:
            return order === 0;
        }
      }),
  );
}
