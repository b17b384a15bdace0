#!/usr/bin/env node
'use strict';
/**
 * `npm run pack`: the library as the npm package users install.
 *
 * Compiles libs/kafka-exactly-once/src into a staging folder of its own (a fresh temporary one: two packs at once
 * never share it; no source maps, no specs, nothing left over from an earlier build), adds the package's own
 * package.json, README.md and LICENSE, and runs `npm pack`. Checks the tarball (it reads whole, and holds the
 * package's entry points and every file npm packed) before it moves it, whole, to
 * dist/packages/kafka-exactly-once-<version>.tgz, with a copy named kafka-exactly-once.tgz, the name the example
 * applications under examples/ install. Prints the tarball's path.
 */
const { spawnSync } = require('child_process');
const { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } = require('fs');
const { builtinModules } = require('module');
const { dirname, join, relative } = require('path');
const { tmpdir } = require('os');

const ROOT = join(__dirname, '..');
const LIB = join(ROOT, 'libs/kafka-exactly-once');
const OUT = join(ROOT, 'dist/packages');

/** Files the package cannot do without: its entry points (package.json `exports` and `bin`). */
const REQUIRED = [
  'package.json', 'README.md', 'LICENSE', 'index.js', 'index.d.ts', 'testing.js', 'testing.d.ts', 'microservices/index.js', 'microservices/index.d.ts', 'prisma.js', 'prisma.d.ts', 'drizzle.js', 'drizzle.d.ts', 'kysely.js', 'kysely.d.ts', 'cli/kafka-eo.js',
  'esm/package.json', 'esm/index.js', 'esm/testing.js', 'esm/microservices/index.js', 'esm/prisma.js', 'esm/drizzle.js', 'esm/kysely.js',
  'kafka/kafka.sh', 'kafka/pom.xml', 'kafka/probe.js',
  // The library's own KafkaJS modules (src/kafkajs/vendor), which its Kafka client loads, and KafkaJS's licence.
  'kafkajs/vendor/client.cjs', 'kafkajs/vendor/consumer.cjs', 'kafkajs/vendor/LICENSE', 'esm/kafkajs/vendor/client.cjs', 'esm/kafkajs/vendor/consumer.cjs', 'esm/kafkajs/vendor/LICENSE',
];

function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    process.stdout.write(result.stdout ?? '');
    throw new Error(`${command} ${args.join(' ')} failed with exit code ${result.status}`);
  }
  return result.stdout;
}

/** The tarball's entries, read whole (a truncated or corrupt tarball fails here), checked against what npm packed. */
function checkTarball(tarball, packed) {
  const entries = run('tar', ['-tzf', tarball], ROOT)
    .split('\n')
    .filter(Boolean)
    .map((e) => e.replace(/^package\//, ''));
  const missing = [...REQUIRED, ...packed.files.map((f) => f.path)].filter((f) => !entries.includes(f));
  if (missing.length > 0 || entries.length !== packed.files.length) {
    throw new Error(`the tarball ${tarball} holds ${entries.length} files, npm packed ${packed.files.length}; missing: ${[...new Set(missing)].slice(0, 10).join(', ') || 'none'}`);
  }
}

/**
 * The ES module build, under esm/ (its own package.json says "type": "module"), for applications and test runners
 * that `import` the package: Jest's ESM mode cannot `require` the ESM-only @nestjs/core 12 from a CommonJS file
 * before Node 24.9, so an `import` of the package must reach ES modules all the way down. The same sources,
 * transpiled by TypeScript to ES modules, then made loadable by Node: relative specifiers get their file (`./x`
 * becomes `./x.js` or `./x/index.js`), and a file that calls `require` (the optional peers prom-client,
 * @opentelemetry/api, ajv and protobufjs, loaded only when used, and KafkaJS's modules, which the room src/kafkajs loads) gets one
 * from `createRequire(import.meta.url)`: it loads the same KafkaJS module instances as the application's
 * `import 'kafkajs'` (and, under Jest, the test's module registry); the library's own KafkaJS modules
 * (src/kafkajs/vendor/*.cjs) are copied beside it. The CLI stays CommonJS only (its `bin`).
 */
function buildEsm(staging) {
  const esm = join(staging, 'esm');
  // File by file (the sources are isolatedModules-clean, and the CommonJS build has type-checked them): the
  // same output as a whole-program compile, in a fraction of its time.
  const ts = require('typescript');
  const config = ts.getParsedCommandLineOfConfigFile(join(LIB, 'tsconfig.lib.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); } });
  const compilerOptions = { ...config.options, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler, declaration: false, sourceMap: false, inlineSourceMap: false };
  const sources = join(LIB, 'src');
  const files = config.fileNames.filter((f) => !relative(sources, f).startsWith('cli/'));
  const emitted = new Set(files);
  const specifier = /(\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}\/[^'"]*)\2/g;
  for (const source of files) {
    const name = relative(sources, source);
    const { outputText, diagnostics } = ts.transpileModule(readFileSync(source, 'utf8'), { compilerOptions, fileName: source, reportDiagnostics: true });
    if (diagnostics.length > 0) throw new Error(`esm build: ${name}: ${ts.flattenDiagnosticMessageText(diagnostics[0].messageText, '\n')}`);
    // A relative specifier names a source file of this build: ./x.ts becomes ./x.js, ./x/index.ts ./x/index.js.
    let code = outputText.replace(specifier, (whole, lead, quote, spec) => {
      const target = join(dirname(source), spec);
      const resolved = emitted.has(`${target}.ts`) ? `${spec}.js` : emitted.has(join(target, 'index.ts')) ? `${spec}/index.js` : undefined;
      if (!resolved) throw new Error(`esm build: ${name} imports ${spec}, which is neither ${spec}.ts nor ${spec}/index.ts of this build`);
      return `${lead}${quote}${resolved}${quote}`;
    });
    // Named and namespace imports of packages: Node sees only the names its lexer finds in a CommonJS package
    // (7 of KafkaJS's 44, 2 of avsc's 16), so each binding is read from the package's exports object, the
    // namespace's `default` for a CommonJS package, the namespace itself for an ES module package.
    let packages = 0;
    code = code.replace(/^import (\{[^}]*\}|\* as (\w+)) from (['"])([^'"]+)\3;$/gm, (whole, bindings, namespace, quote, spec) => {
      if (spec.startsWith('.') || spec.startsWith('node:') || builtinModules.includes(spec)) return whole;
      const ns = `__package${packages++}`;
      const value = `__exportsOf(${ns})`;
      const names = namespace ? namespace : bindings.replace(/\s+as\s+/g, ': ');
      return `import * as ${ns} from ${quote}${spec}${quote};\nconst ${names} = ${value};`;
    });
    // Any other import or re-export of a package would see only the names Node's lexer finds: refused here, so
    // that a new form in the sources fails the pack instead of a user's application.
    for (const [line, spec] of code.matchAll(/^(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"];?$/gm)) {
      const bare = !spec.startsWith('.') && !spec.startsWith('node:') && !builtinModules.includes(spec);
      if (bare && !/^import \* as __package\d+ from/.test(line)) throw new Error(`esm build: ${name}: \`${line}\` is a form the ES module build does not rewrite`);
    }
    if (/\bimport\s*\(\s*['"`](?!\.)/.test(code)) throw new Error(`esm build: ${name} imports a package dynamically, which the ES module build does not rewrite`);
    if (packages > 0) {
      code = `const __exportsOf = (ns) => (ns.default !== null && (typeof ns.default === 'object' || typeof ns.default === 'function') ? { ...ns.default, ...ns } : ns);\n${code}`;
    }
    if (/\brequire\s*[(.]/.test(code)) code = `import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);\n${code}`;
    if (/\b(__dirname|__filename|module\.exports|exports\.)\b/.test(code.replace(/\/\/.*|\/\*[\s\S]*?\*\/|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`/g, ''))) {
      throw new Error(`esm build: ${name} uses a CommonJS-only binding`);
    }
    const out = join(esm, name.replace(/\.ts$/, '.js'));
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, code);
  }
  writeFileSync(join(esm, 'package.json'), `${JSON.stringify({ type: 'module' }, null, 2)}\n`);
}

function pack() {
  const { name, version } = JSON.parse(readFileSync(join(LIB, 'package.json'), 'utf8'));
  const work = mkdtempSync(join(tmpdir(), 'kafka-eo-pack-'));
  mkdirSync(OUT, { recursive: true });
  // Written beside its destination and renamed into place: a reader never sees a tarball half-written.
  const landing = mkdtempSync(join(OUT, '.pack-'));
  try {
    const staging = join(work, name);
    // The console's page, as the library's code holds it (console-assets.generated.ts), from its files.
    run(process.execPath, [join(ROOT, 'scripts/console-assets.js')], ROOT);
    run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(LIB, 'tsconfig.lib.json'), '--outDir', staging, '--sourceMap', 'false'], ROOT);
    buildEsm(staging);
    // The KafkaJS modules the library's Kafka client is built from (src/kafkajs/vendor: CommonJS, with KafkaJS's
    // licence), beside the code that loads them in both builds.
    for (const build of [staging, join(staging, 'esm')]) {
      const vendor = join(build, 'kafkajs/vendor');
      mkdirSync(vendor, { recursive: true });
      for (const file of readdirSync(join(LIB, 'src/kafkajs/vendor'))) copyFileSync(join(LIB, 'src/kafkajs/vendor', file), join(vendor, file));
    }
    // The broker script of kafka-exactly-once/testing's startTestKafka (the one this repository is tested with).
    mkdirSync(join(staging, 'kafka'));
    for (const file of ['kafka.sh', 'pom.xml', 'probe.js']) copyFileSync(join(ROOT, 'scripts/kafka', file), join(staging, 'kafka', file));
    copyFileSync(join(LIB, 'package.json'), join(staging, 'package.json'));
    copyFileSync(join(LIB, 'README.md'), join(staging, 'README.md'));
    copyFileSync(join(ROOT, 'LICENSE'), join(staging, 'LICENSE'));
    const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', landing], staging));
    if (packed.filename !== `${name}-${version}.tgz`) throw new Error(`npm pack wrote ${packed.filename}, expected ${name}-${version}.tgz`);
    const written = join(landing, packed.filename);
    checkTarball(written, packed);
    const tarball = join(OUT, packed.filename);
    copyFileSync(written, join(landing, `${name}.tgz`));
    renameSync(join(landing, `${name}.tgz`), join(OUT, `${name}.tgz`));
    renameSync(written, tarball);
    return { tarball, files: packed.files.length, size: packed.size };
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(landing, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const { tarball, files, size } = pack();
  process.stderr.write(`packed ${files} files, ${Math.round(size / 1024)} KiB\n`);
  process.stdout.write(`${tarball}\n`);
}

module.exports = { pack, checkTarball, buildEsm };
