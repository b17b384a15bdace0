import { Kafka } from 'kafkajs';
import { KafkaJsFixesNotInForceError } from './errors/kafkajs-fixes-not-in-force.error';
import { ABORTED_TRANSACTIONS_FIX_MARK } from './kafkajs-aborted-transactions.fix';
import { assertKafkaJsFixesInForce, kafkaJsFixesNotInForce, kafkaJsPackageOf, type LocatedKafkaJs, locateKafkaJs } from './kafkajs-fixes-in-force';
import { PARTITION_WORKERS_FIX_MARK } from './kafkajs-partition-workers.fix';
import { REQUEST_QUEUE_FIX_MARK } from './kafkajs-request-queue.fix';

/** The modules of a KafkaJS copy as the fixes leave them, less what `unmark` names. */
function copy({ version = '2.2.4', unmark = [] as string[], path = '/app/node_modules/kafkajs' } = {}): LocatedKafkaJs {
  const modules = new Map<string, unknown>();
  const classWith = (mark: symbol, file: string) => {
    class Patched {}
    if (!unmark.includes(file)) (Patched.prototype as unknown as Record<symbol, unknown>)[mark] = true;
    return Patched;
  };
  modules.set('src/consumer/consumerGroup', classWith(PARTITION_WORKERS_FIX_MARK, 'src/consumer/consumerGroup'));
  modules.set('src/network/requestQueue', classWith(REQUEST_QUEUE_FIX_MARK, 'src/network/requestQueue'));
  for (let v = 4; v <= 11; v++) {
    const file = `src/protocol/requests/fetch/v${v}/response`;
    modules.set(file, unmark.includes(file) ? { decode: () => undefined } : { decode: () => undefined, [ABORTED_TRANSACTIONS_FIX_MARK]: true });
  }
  return {
    path,
    version,
    load: (file) => {
      if (!modules.has(file)) throw new Error(`Cannot find module '${path}/${file}'`);
      return modules.get(file);
    },
  };
}

describe('the corrections of KafkaJS in force on a client', () => {
  it('lets a copy of 2.2.4 carrying every mark run', () => {
    expect(kafkaJsFixesNotInForce(copy())).toBeUndefined();
  });

  it.each([
    ['src/consumer/consumerGroup', 'partition-workers'],
    ['src/network/requestQueue', 'request-queue'],
    ['src/protocol/requests/fetch/v11/response', 'aborted-transactions'],
    ['src/protocol/requests/fetch/v4/response', 'aborted-transactions'],
  ])('finds the fix missing when %s carries no mark: %s', (file, fix) => {
    const refused = kafkaJsFixesNotInForce(copy({ unmark: [file] }));
    expect(refused?.missing.map((f) => f.name)).toEqual([fix]);
    expect(refused?.found).toEqual({ path: '/app/node_modules/kafkajs', version: '2.2.4' });
  });

  it('counts a fix whose module the copy lacks as not in force', () => {
    const located = copy();
    const load = (file: string) => {
      if (file.includes('fetch/v9')) throw new Error(`Cannot find module '${file}'`);
      return located.load(file);
    };
    const refused = kafkaJsFixesNotInForce({ ...located, load });
    expect(refused?.missing.map((f) => f.name)).toEqual(['aborted-transactions']);
  });

  it('refuses another version even with every mark', () => {
    expect(kafkaJsFixesNotInForce(copy({ version: '2.2.3' }))).toEqual({ found: { path: '/app/node_modules/kafkajs', version: '2.2.3' }, missing: [] });
  });

  it('finds every fix missing on a copy that could not be found', () => {
    expect(kafkaJsFixesNotInForce(undefined)?.missing.map((f) => f.name)).toEqual(['partition-workers', 'aborted-transactions', 'request-queue']);
  });
});

describe('the KafkaJS copy of a client', () => {
  class Client {}
  const manifests: Record<string, { name: string; version: string }> = {
    '/app/node_modules/kafkajs/package.json': { name: 'kafkajs', version: '2.2.4' },
    '/app/node_modules/other/node_modules/kafkajs/package.json': { name: 'kafkajs', version: '2.1.0' },
    '/app/package.json': { name: 'app', version: '1.0.0' },
  };
  const readJson = (path: string) => manifests[path];

  it('is the nearest folder up whose package.json is kafkajs', () => {
    expect(kafkaJsPackageOf('/app/node_modules/other/node_modules/kafkajs/src/index.js', readJson)).toEqual({ path: '/app/node_modules/other/node_modules/kafkajs', version: '2.1.0' });
    expect(kafkaJsPackageOf('/app/src/main.js', readJson)).toBeUndefined();
  });

  it("is found by the loaded module that exports the client's class, and loads that copy's modules by path", () => {
    const loaded: string[] = [];
    const cache = {
      '/app/node_modules/kafkajs/src/index.js': { filename: '/app/node_modules/kafkajs/src/index.js', exports: class Other {} },
      '/app/node_modules/other/node_modules/kafkajs/src/index.js': { filename: '/app/node_modules/other/node_modules/kafkajs/src/index.js', exports: Client },
    };
    const located = locateKafkaJs(new Client() as never, { cache, readJson, load: (path) => loaded.push(path) });
    expect(located).toMatchObject({ path: '/app/node_modules/other/node_modules/kafkajs', version: '2.1.0' });
    located!.load('src/network/requestQueue');
    expect(loaded).toEqual(['/app/node_modules/other/node_modules/kafkajs/src/network/requestQueue']);
  });

  it('is found by the package index.js that exports it as Kafka, and not at all when no loaded module exports it', () => {
    const cache = { '/app/node_modules/kafkajs/index.js': { filename: '/app/node_modules/kafkajs/index.js', exports: { Kafka: Client } } };
    expect(locateKafkaJs(new Client() as never, { cache, readJson })?.path).toBe('/app/node_modules/kafkajs');
    expect(locateKafkaJs(new (class Unknown {})() as never, { cache, readJson })).toBeUndefined();
  });

  it('finds the library\'s own client in the loaded modules, by its src/index.js or its index.js', () => {
    const located = locateKafkaJs(new Kafka({ brokers: ['127.0.0.1:1'], logLevel: 0 }));
    expect(located?.path).toBe(require('path').dirname(require.resolve('kafkajs/package.json')));
    expect(located?.version).toBe('2.2.4');
    expect((located?.load('index') as { Kafka: unknown }).Kafka).toBe(Kafka);
  });
});

describe('the error', () => {
  const corrected = { path: '/app/node_modules/kafkajs', version: '2.2.4' };

  it('names the missing fixes, the copy found, the one corrected and what to do', () => {
    const refused = kafkaJsFixesNotInForce(copy({ path: '/app/node_modules/other/node_modules/kafkajs', unmark: ['src/consumer/consumerGroup', 'src/network/requestQueue'] }))!;
    const err = new KafkaJsFixesNotInForceError(refused.found, refused.missing, corrected, '2.2.4');
    expect(err.name).toBe('KafkaJsFixesNotInForceError');
    expect(err.retriable).toBe(false);
    expect(err.message).toContain('partition-workers (');
    expect(err.message).toContain('request-queue (');
    expect(err.message).not.toContain('aborted-transactions');
    expect(err.message).toContain('built from kafkajs 2.2.4 at /app/node_modules/other/node_modules/kafkajs');
    expect(err.message).toContain('applied to kafkajs 2.2.4 at /app/node_modules/kafkajs: the application has two copies of KafkaJS');
    expect(err.message).toMatch(/`npm ls kafkajs`.*"kafkajs": "2\.2\.4".*`npm dedupe`/);
  });

  it('names the version when it is not 2.2.4', () => {
    const err = new KafkaJsFixesNotInForceError({ path: '/app/node_modules/kafkajs', version: '2.3.0' }, [], corrected, '2.2.4');
    expect(err.message).toMatch(/^kafka-exactly-once corrects KafkaJS 2\.2\.4 and runs on no other version, and its Kafka client is built from kafkajs 2\.3\.0 at \/app\/node_modules\/kafkajs\. Use one kafkajs 2\.2\.4/);
  });
});

describe('assertKafkaJsFixesInForce on a real client', () => {
  it('refuses a client of a KafkaJS the fixes were not applied to, and lets it run once they are', () => {
    jest.isolateModules(() => {
      // A registry of its own: a KafkaJS loaded afresh, as a second copy would be.
      /* eslint-disable @typescript-eslint/no-require-imports */
      const { Kafka: FreshKafka } = require('kafkajs') as typeof import('kafkajs');
      const { assertKafkaJsFixesInForce: assertFresh } = require('./kafkajs-fixes-in-force') as typeof import('./kafkajs-fixes-in-force');
      const { fixKafkaJs } = require('./kafkajs.fixes') as typeof import('./kafkajs.fixes');
      const { KafkaJsFixesNotInForceError: FreshError } = require('./errors/kafkajs-fixes-not-in-force.error') as typeof import('./errors/kafkajs-fixes-not-in-force.error');
      /* eslint-enable @typescript-eslint/no-require-imports */
      const kafka = new FreshKafka({ brokers: ['127.0.0.1:1'], logLevel: 0 });
      let caught: unknown;
      try {
        assertFresh(kafka);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(FreshError);
      expect((caught as KafkaJsFixesNotInForceError).missing.map((f) => f.name)).toEqual(['partition-workers', 'aborted-transactions', 'request-queue']);
      fixKafkaJs();
      expect(() => assertFresh(kafka)).not.toThrow();
    });
  });

  it("checks the client's class, not the library's: a client of another module registry is refused", () => {
    // This file's registry: the fixes applied (as the module applies them when it builds its client).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require('./kafkajs.fixes') as typeof import('./kafkajs.fixes')).fixKafkaJs();
    let other!: Kafka;
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      other = new (require('kafkajs') as typeof import('kafkajs')).Kafka({ brokers: ['127.0.0.1:1'], logLevel: 0 });
    });
    expect(() => assertKafkaJsFixesInForce(new Kafka({ brokers: ['127.0.0.1:1'], logLevel: 0 }))).not.toThrow();
    expect(() => assertKafkaJsFixesInForce(other)).toThrow(KafkaJsFixesNotInForceError);
  });
});
