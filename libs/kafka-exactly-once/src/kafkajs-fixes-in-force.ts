import { readFileSync } from 'fs';
import { dirname, join } from 'path';
import type { Kafka } from 'kafkajs';
import { KafkaJsFixesNotInForceError, type KafkaJsCopy, type KafkaJsFixName } from './errors/kafkajs-fixes-not-in-force.error';
import { ABORTED_TRANSACTIONS_FIX_MARK } from './kafkajs-aborted-transactions.fix';
import { PARTITION_WORKERS_FIX_MARK } from './kafkajs-partition-workers.fix';
import { REQUEST_QUEUE_FIX_MARK } from './kafkajs-request-queue.fix';
import { KAFKAJS_VERSION } from './producer/kafkajs-internals';

/** A module of one KafkaJS copy, by its path inside the package (`src/network/requestQueue`). */
export type LoadFromCopy = (file: string) => unknown;

/** A correction of KafkaJS the library relies on, and how to see that it is in force on one copy. */
export interface KafkaJsFix extends KafkaJsFixName {
  /** Whether the modules of that copy carry the fix's mark (a module that cannot be loaded carries none). */
  inForce(load: LoadFromCopy): boolean;
}

/** The Fetch versions whose responses kafkajs-aborted-transactions.fix.ts filters (those that read committed). */
const FILTERED_FETCH_VERSIONS = [4, 5, 6, 7, 8, 9, 10, 11];

const marked = (target: unknown, mark: symbol) => (typeof target === 'object' || typeof target === 'function') && target !== null && (target as Record<symbol, unknown>)[mark] === true;
const prototypeOf = (exported: unknown) => (typeof exported === 'function' ? (exported as { prototype: unknown }).prototype : undefined);

/**
 * The corrections of KafkaJS 2.2.4 the library relies on (kafkajs.fixes.ts applies them), each by the mark it
 * leaves on the prototype or modules it patched.
 */
export const KAFKAJS_FIXES: readonly KafkaJsFix[] = [
  {
    name: 'partition-workers',
    corrects: "a rebalance waits for the partitions' units of work, and a resumed partition is fetched at once",
    inForce: (load) => marked(prototypeOf(load('src/consumer/consumerGroup')), PARTITION_WORKERS_FIX_MARK),
  },
  {
    name: 'aborted-transactions',
    corrects: 'read-committed fetches leave out the records of aborted transactions',
    inForce: (load) => FILTERED_FETCH_VERSIONS.every((v) => marked(load(`src/protocol/requests/fetch/v${v}/response`), ABORTED_TRANSACTIONS_FIX_MARK)),
  },
  {
    name: 'request-queue',
    corrects: 'an idle connection is not polled every millisecond',
    inForce: (load) => marked(prototypeOf(load('src/network/requestQueue')), REQUEST_QUEUE_FIX_MARK),
  },
];

/** One KafkaJS package as the check sees it: where it lies, its version, and a loader of its own modules. */
export interface LocatedKafkaJs extends KafkaJsCopy {
  load: LoadFromCopy;
}

/** What a module cache holds of a module (Node's `require.cache`, or Jest's registry behind it). */
interface CachedModule {
  filename?: string;
  id?: string;
  exports?: unknown;
}

/** The folder of the kafkajs package that holds `file`: the nearest one up with a package.json named kafkajs. */
export function kafkaJsPackageOf(file: string, readJson: (path: string) => { name?: string; version?: string } | undefined = readPackageJson): { path: string; version?: string } | undefined {
  for (let dir = dirname(file), up = dirname(dir); ; dir = up, up = dirname(dir)) {
    const manifest = readJson(join(dir, 'package.json'));
    if (manifest?.name === 'kafkajs') return { path: dir, version: manifest.version };
    if (up === dir) return undefined;
  }
}

function readPackageJson(path: string): { name?: string; version?: string } | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as { name?: string; version?: string };
  } catch {
    return undefined;
  }
}

/**
 * The KafkaJS copy `kafka` is an instance of: the loaded module that exports its class (`src/index.js`, or the
 * package's `index.js` by its `Kafka`), its package, and a loader of that copy's modules (by their paths, so the
 * very module instances its consumers and producers use). Undefined when no loaded module exports the class.
 */
export function locateKafkaJs(
  kafka: Kafka,
  {
    cache = require.cache as Record<string, CachedModule | undefined>,
    load = require,
    readJson = readPackageJson,
  }: { cache?: Record<string, CachedModule | undefined>; load?: (path: string) => unknown; readJson?: (path: string) => { name?: string; version?: string } | undefined } = {},
): LocatedKafkaJs | undefined {
  const client = Object.getPrototypeOf(kafka)?.constructor as unknown;
  if (typeof client !== 'function') return undefined;
  for (const [key, entry] of Object.entries(cache)) {
    const exported = entry?.exports as { Kafka?: unknown } | undefined;
    if (!exported || (exported !== client && exported.Kafka !== client)) continue;
    const found = kafkaJsPackageOf(entry?.filename ?? entry?.id ?? key, readJson);
    if (found) return { ...found, load: (file) => load(join(found.path, file)) };
  }
  return undefined;
}

/** The KafkaJS this library resolves itself (the one kafkajs.fixes.ts corrects). */
function correctedKafkaJs(): LocatedKafkaJs {
  let path: string | undefined;
  let version: string | undefined;
  try {
    path = dirname(require.resolve('kafkajs/package.json'));
    version = (require('kafkajs/package.json') as { version?: string }).version;
  } catch {
    // A bundle without the package's files: its modules still load by name.
  }
  return { path, version, load: (file) => require(`kafkajs/${file}`) };
}

/**
 * What keeps a client of the KafkaJS `copy` from running the library: its version when it is not
 * `expectedVersion`, and the corrections that are not in force on it (all of them on a copy not found).
 * Undefined when it may run.
 */
export function kafkaJsFixesNotInForce(copy: LocatedKafkaJs | undefined, expectedVersion = KAFKAJS_VERSION, fixes: readonly KafkaJsFix[] = KAFKAJS_FIXES): { found: KafkaJsCopy; missing: KafkaJsFix[] } | undefined {
  if (!copy) return { found: {}, missing: [...fixes] };
  const found = { path: copy.path, version: copy.version };
  const missing = fixes.filter((fix) => {
    try {
      return !fix.inForce(copy.load);
    } catch {
      return true; // a module of the fix that this copy does not have: the fix is not in it
    }
  });
  const otherVersion = copy.version !== undefined && copy.version !== expectedVersion;
  return otherVersion || missing.length > 0 ? { found, missing } : undefined;
}

/** Client classes already checked, so that a check repeated for every boot of a process costs nothing. */
const passed = new WeakSet<object>();

/**
 * Throws KafkaJsFixesNotInForceError unless every correction of KafkaJS the library relies on is in force on the
 * KafkaJS `kafka` is built from, and that KafkaJS is 2.2.4. It looks at the client's own KafkaJS, the copy whose
 * class `kafka` is an instance of and whose modules its consumers and producers run (KafkaJS keeps its consumer
 * group inside a closure, created only once a consumer runs: the client is the object the check can reach before
 * anything consumes): a second copy of kafkajs in the application, or a client built from one, is uncorrected
 * even though the copy the library resolves is corrected.
 */
export function assertKafkaJsFixesInForce(kafka: Kafka): void {
  const client = Object.getPrototypeOf(kafka)?.constructor as object | undefined;
  if (client && passed.has(client)) return;
  const corrected = correctedKafkaJs();
  // Else the copy the library resolves, when the client is one of its: found so in a bundle too, where no module has a path.
  const own = () => client !== undefined && client === (corrected.load('index') as { Kafka?: unknown }).Kafka;
  const copy = locateKafkaJs(kafka) ?? (own() ? corrected : undefined);
  const refused = kafkaJsFixesNotInForce(copy);
  if (refused) throw new KafkaJsFixesNotInForceError(refused.found, refused.missing, { path: corrected.path, version: corrected.version }, KAFKAJS_VERSION);
  if (client) passed.add(client);
}
