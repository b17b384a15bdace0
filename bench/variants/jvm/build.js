#!/usr/bin/env node
'use strict';
/**
 * Bench variant J: fetches the jars of pom.xml and compiles BenchLedger.java, once, into a cache; launch() answers
 * the command line bench/bench.js spawns (JVM start-up is then part of the variant's measured start-up; Maven and
 * javac are not).
 *
 *   await launch() -> { command: 'java', args: [...JVM options, '-cp', classpath, 'BenchLedger'] }
 *   await ensureBuilt() -> { jarsDir, classDir, classpath, fetched: boolean, compiled: boolean }
 *
 * Cache root: $BENCH_JVM_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/kafka-exactly-once/bench-jvm, holding
 *   jars/<hash of pom.xml>/      `mvn dependency:copy-dependencies` output (runtime scope) + a `.complete` marker
 *   classes/<hash>/              javac output (hash of BenchLedger.java and of the jar names) + a `.complete` marker
 * Both are written into a temporary sibling and renamed into place, so an interrupted build is never taken for a
 * finished one and two concurrent builds keep one copy. A changed pom or source gets a new folder.
 * $BENCH_JVM_OPTS (whitespace separated) replaces the default JVM options.
 *
 * CLI: node bench/variants/jvm/build.js   builds if needed and prints the command line.
 */
const { execFile } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const POM = path.join(__dirname, 'pom.xml');
const SOURCE = path.join(__dirname, 'BenchLedger.java');
const MAIN_CLASS = 'BenchLedger';
// A bounded heap as the issue asks; the serial collector: one consumer thread, a small live set, 2 cores shared
// with the broker and PostgreSQL, so no concurrent GC threads competing with them.
const JVM_OPTIONS = ['-Xms128m', '-Xmx512m', '-XX:+UseSerialGC'];

function cacheRoot() {
  return (
    process.env.BENCH_JVM_CACHE ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'kafka-exactly-once', 'bench-jvm')
  );
}

function hash(...parts) {
  const h = crypto.createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 16);
}

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        err.message = `${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`;
        reject(err);
      } else resolve({ stdout, stderr });
    });
  });
}

/** Runs `produce(tmpDir)` and renames tmpDir to `dir` with a `.complete` marker, unless `dir` is already complete. */
async function buildOnce(dir, produce) {
  if (fs.existsSync(path.join(dir, '.complete'))) return false;
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true });
  try {
    await produce(tmp);
    fs.writeFileSync(path.join(tmp, '.complete'), `${new Date().toISOString()}\n`);
    // A stale incomplete folder (no marker) would make the rename fail: clear it first.
    if (fs.existsSync(dir) && !fs.existsSync(path.join(dir, '.complete'))) fs.rmSync(dir, { recursive: true, force: true });
    try {
      fs.renameSync(tmp, dir);
    } catch (err) {
      if (!fs.existsSync(path.join(dir, '.complete'))) throw err; // else another process finished first: keep its copy
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return true;
}

async function build() {
  const root = cacheRoot();
  const jarsDir = path.join(root, 'jars', hash(fs.readFileSync(POM)));
  const fetched = await buildOnce(jarsDir, (tmp) =>
    run('mvn', ['-q', '-B', '-f', POM, 'dependency:copy-dependencies', '-DincludeScope=runtime', `-DoutputDirectory=${tmp}`]),
  );
  const jars = fs.readdirSync(jarsDir).filter((n) => n.endsWith('.jar')).sort();
  if (!jars.some((n) => n.startsWith('kafka-clients-'))) throw new Error(`no kafka-clients jar in ${jarsDir}`);
  const jarsGlob = path.join(jarsDir, '*');
  const classDir = path.join(root, 'classes', hash(fs.readFileSync(SOURCE), jars.join(',')));
  const compiled = await buildOnce(classDir, (tmp) =>
    run('javac', ['--release', '17', '-encoding', 'UTF-8', '-proc:none', '-Xlint:all,-options', '-cp', jarsGlob, '-d', tmp, SOURCE]),
  );
  return { jarsDir, classDir, classpath: [classDir, jarsGlob].join(path.delimiter), fetched, compiled };
}

let building = null;

/** Builds once per process; concurrent callers share one build. */
function ensureBuilt() {
  if (!building) {
    building = build().catch((err) => {
      building = null;
      throw err;
    });
  }
  return building;
}

async function launch() {
  const { classpath } = await ensureBuilt();
  const options = process.env.BENCH_JVM_OPTS ? process.env.BENCH_JVM_OPTS.split(/\s+/).filter(Boolean) : JVM_OPTIONS;
  return { command: 'java', args: [...options, '-cp', classpath, MAIN_CLASS] };
}

module.exports = { launch, ensureBuilt, cacheRoot };

if (require.main === module) {
  ensureBuilt()
    .then(async (b) => {
      process.stderr.write(`${b.fetched ? 'fetched jars' : 'jars cached'}, ${b.compiled ? 'compiled' : 'classes cached'}: ${b.classDir}\n`);
      const { command, args } = await launch();
      process.stdout.write(`${[command, ...args].join(' ')}\n`);
    })
    .catch((err) => {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
    });
}
