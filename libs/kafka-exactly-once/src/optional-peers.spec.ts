import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { MissingPeerError } from './errors/missing-peer.error';
import { assertPeersInstalled, installedVersion, installLineOf, OPTIONAL_PEERS, satisfies } from './optional-peers';
import { formatPeersNeeded } from './formats/registry-boot';

const manifest = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { peerDependencies: Record<string, string>; peerDependenciesMeta: Record<string, { optional?: boolean }> };

describe('optional peer dependencies', () => {
  it("names each in the range of the package's peerDependencies, as an optional one", () => {
    for (const [name, range] of Object.entries(OPTIONAL_PEERS)) {
      expect([name, manifest.peerDependencies[name]]).toEqual([name, range]);
      expect([name, manifest.peerDependenciesMeta[name]?.optional]).toEqual([name, true]);
    }
    expect(installLineOf('drizzle-orm')).toBe('npm install "drizzle-orm@>=0.36.0 <1.0.0"');
  });

  it('reads the ranges of the peerDependencies', () => {
    expect(satisfies('7.6.6', '^7.0.0')).toBe(true);
    expect(satisfies('8.0.0', '^7.0.0')).toBe(false);
    expect(satisfies('6.12.6', '^8.0.0')).toBe(false);
    expect(satisfies('0.5.1', '>=0.5.0')).toBe(true);
    expect(satisfies('0.13.2', '>=0.14.0')).toBe(false);
    expect(satisfies('0.44.2', '>=0.36.0 <1.0.0')).toBe(true);
    expect(satisfies('1.0.0', '>=0.36.0 <1.0.0')).toBe(false);
    expect(satisfies('12.1.0', '^11.0.0 || ^12.0.0')).toBe(true);
    expect(satisfies('0.5.3', '^0.5.0')).toBe(true);
    expect(satisfies('0.6.0', '^0.5.0')).toBe(false);
    expect(satisfies('8.0.0-beta.1', '^8.0.0')).toBe(true);
    expect(satisfies('workspace', '^8.0.0')).toBe(true);
  });

  it('passes the packages this workspace has installed, in their supported versions', () => {
    expect(() => assertPeersInstalled(Object.keys(OPTIONAL_PEERS).map((peer) => ({ peer: peer as keyof typeof OPTIONAL_PEERS, neededBy: 'a test' })))).not.toThrow();
  });

  it("reads the version of a package whose exports leave its package.json out (drizzle-orm, @prisma/adapter-pg), so that its range is checked", () => {
    for (const peer of ['drizzle-orm', '@prisma/adapter-pg'] as const) {
      // The workspace's copy, read as a file (Node refuses `require('<peer>/package.json')`: ERR_PACKAGE_PATH_NOT_EXPORTED).
      const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'node_modules', peer, 'package.json'), 'utf8')) as { version: string };
      expect(manifest.version).toMatch(/^\d+\.\d+\.\d+/);
      expect([peer, installedVersion(peer)]).toEqual([peer, manifest.version]);
    }
  });

  it('refuses a version outside the range of a package whose package.json is not exported (a Prisma 6 adapter), and stops at its own folder', () => {
    const app = mkdtempSync(join(tmpdir(), 'kafka-eo-peers-'));
    try {
      const root = join(app, 'node_modules', '@prisma', 'adapter-pg');
      mkdirSync(join(root, 'dist', 'cjs'), { recursive: true });
      const exports = { '.': { require: './dist/cjs/index.js' } };
      writeFileSync(join(root, 'package.json'), JSON.stringify({ name: '@prisma/adapter-pg', version: '6.19.0', main: './dist/cjs/index.js', exports }));
      writeFileSync(join(root, 'dist', 'cjs', 'package.json'), JSON.stringify({ type: 'commonjs' })); // a manifest without a name
      writeFileSync(join(root, 'dist', 'cjs', 'index.js'), 'module.exports = {};');
      expect(installedVersion('@prisma/adapter-pg', app)).toBe('6.19.0');
      expect(() => assertPeersInstalled([{ peer: '@prisma/adapter-pg', neededBy: 'prismaDatabase(...)' }], app)).toThrow(
        '@prisma/adapter-pg 6.19.0 is installed, and kafka-exactly-once supports ^7.0.0 (needed: prismaDatabase(...))',
      );
      // A package without any manifest of its own naming it: found, its version unknown (not refused).
      writeFileSync(join(root, 'package.json'), JSON.stringify({ main: './dist/cjs/index.js' }));
      expect(installedVersion('@prisma/adapter-pg', app)).toBe('');
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });

  it('says what each declared format needs', () => {
    const topics = {
      'receipts.proto': { format: 'protobuf' as const },
      'receipts.json': { format: 'json' as const, wireFormat: 'schema-registry' as const },
      'orders.plain': { format: 'json' as const, registryFraming: false },
      'orders.json': { format: 'json' as const },
      notes: { schema: 't.Note' },
    };
    expect(formatPeersNeeded({ topics, wireFormat: 'single-object' }, [{ name: 'A.onProto', format: 'protobuf' }, { name: 'B.onJson', format: 'json' }, { name: 'C.onAvro', format: 'avro' }])).toEqual([
      { peer: 'protobufjs', neededBy: 'A.onProto reads format protobuf' },
      { peer: 'protobufjs', neededBy: 'topics["receipts.proto"] is format protobuf' },
      { peer: 'ajv', neededBy: `topics["receipts.json"] is written as JSON Schema (format json in the registry's framing)` },
    ]);
    // The module's wireFormat makes every JSON topic JSON Schema, but the one declared plain JSON only.
    expect(formatPeersNeeded({ topics, wireFormat: 'schema-registry' }, []).map((n) => n.neededBy)).toEqual([
      'topics["receipts.proto"] is format protobuf',
      `topics["receipts.json"] is written as JSON Schema (format json in the registry's framing)`,
      `topics["orders.json"] is written as JSON Schema (format json in the registry's framing)`,
    ]);
  });

  it('refuses in one error every package missing or outside its range, with what needs it and one install line', () => {
    const error = new MissingPeerError([
      { name: 'protobufjs', range: '^7.0.0', neededBy: ['A.onProto reads format protobuf', 'topics["x"] is format protobuf'] },
      { name: 'ajv', range: '^8.0.0', installed: '6.12.6', neededBy: ['topics["y"] is written as JSON Schema'] },
    ]);
    expect(error.message).toBe(
      'protobufjs is not installed (needed: A.onProto reads format protobuf; topics["x"] is format protobuf); ajv 6.12.6 is installed, and kafka-exactly-once supports ^8.0.0 (needed: topics["y"] is written as JSON Schema): 2 optional peer dependencies of kafka-exactly-once that this configuration needs. Install them (the versions kafka-exactly-once supports), then start again: npm install "protobufjs@^7.0.0" "ajv@^8.0.0"',
    );
    expect(error.retriable).toBe(false);
  });
});
