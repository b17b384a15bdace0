#!/usr/bin/env node
'use strict';
/**
 * Read-committed snapshot of Kafka topics through the reference Java client (scripts/verify/java/ReadTopics.java),
 * for the independent verifier. Imports nothing from libs/ and no npm package: only node built-ins, javac and java.
 *
 * API
 *   await readCommitted({ brokers: ['127.0.0.1:9092'], topics: ['a', 'b'], timeoutMs: 120000 })
 *     -> Array<{ topic, partition, offset: string, key: Buffer|null, value: Buffer|null,
 *                headers: Array<[string, Buffer|null]>, timestamp: string }>
 *     Records of each partition come in offset order; partitions are interleaved as the client fetched them.
 *   await readCommittedDetailed(same options)
 *     -> { records (as above), counts: { topic: n }, endOffsets: { topic: { partition: string } }, ms }
 *   await ensureCompiled() -> { classDir, classpath, jarsDir, compiled: boolean, compileMs }
 *   kafkaJarsDir() -> the Kafka jars folder used as the classpath
 *
 * The class is compiled once with javac into <repo>/.verify-cache/java/<hash>/ (hash of the Java source and of the
 * kafka-clients jar path), so a changed source or Kafka version recompiles. The classpath is every jar of the Kafka
 * jars folder fetched by `bash scripts/kafka/kafka.sh fetch`: $KAFKA_JARS_CACHE (default
 * ${XDG_CACHE_HOME:-~/.cache}/kafka-exactly-once/kafka) / $KAFKA_VERSION (default 4.4.0). VERIFY_CACHE_DIR overrides
 * the cache root.
 *
 * CLI
 *   node scripts/verify/java-reader.js --brokers host:port[,host:port] [--timeout-ms N] <topic> [<topic>...]
 *     prints the Java program's JSON lines on stdout (one per record, then {"done":true,...}); exit code 0 or 1.
 *   node scripts/verify/java-reader.js --compile-only
 */
const { spawn, execFile } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const ROOT = path.resolve(__dirname, '..', '..');
const SOURCE = path.join(__dirname, 'java', 'ReadTopics.java');
const LOG_CONFIG = path.join(__dirname, 'java', 'log4j2-stderr.properties');
const MAIN_CLASS = 'ReadTopics';
const DEFAULT_TIMEOUT_MS = 120000;
// JVM start-up matters more than peak speed for a snapshot read: C1 only, a small serial heap.
const JVM_OPTIONS = ['-Xms64m', '-Xmx512m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];

function kafkaJarsDir() {
  const cache =
    process.env.KAFKA_JARS_CACHE ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'kafka-exactly-once', 'kafka');
  return path.join(cache, process.env.KAFKA_VERSION || '4.4.0');
}

function findClientsJar(jarsDir) {
  let names;
  try {
    names = fs.readdirSync(jarsDir);
  } catch {
    names = [];
  }
  const jar = names.find((n) => /^kafka-clients-.*\.jar$/.test(n));
  if (!jar) {
    throw new Error(
      `no kafka-clients jar in ${jarsDir}: run \`bash scripts/kafka/kafka.sh fetch\` (or set KAFKA_JARS_CACHE / KAFKA_VERSION)`,
    );
  }
  return path.join(jarsDir, jar);
}

function cacheRoot() {
  return process.env.VERIFY_CACHE_DIR || path.join(ROOT, '.verify-cache');
}

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        err.message = `${cmd} failed: ${err.message}\n${stderr}`;
        reject(err);
      } else resolve({ stdout, stderr });
    });
  });
}

let compiling = null;

/** Compiles ReadTopics.java once per (source, kafka-clients jar); concurrent callers share one javac run. */
function ensureCompiled() {
  if (!compiling) {
    compiling = compile().catch((err) => {
      compiling = null;
      throw err;
    });
  }
  return compiling;
}

async function compile() {
  const jarsDir = kafkaJarsDir();
  const clientsJar = findClientsJar(jarsDir);
  const source = fs.readFileSync(SOURCE);
  const hash = crypto.createHash('sha256').update(source).update('\0').update(clientsJar).digest('hex').slice(0, 16);
  const classDir = path.join(cacheRoot(), 'java', hash);
  const jarsGlob = path.join(jarsDir, '*');
  const classpath = [classDir, jarsGlob].join(path.delimiter);
  const marker = path.join(classDir, '.complete');
  if (fs.existsSync(marker)) return { classDir, classpath, jarsDir, compiled: false, compileMs: 0 };

  const started = Date.now();
  const tmp = `${classDir}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true });
  try {
    await run('javac', ['--release', '17', '-encoding', 'UTF-8', '-proc:none', '-cp', jarsGlob, '-d', tmp, SOURCE]);
    fs.writeFileSync(path.join(tmp, '.complete'), `${SOURCE}\n${clientsJar}\n`);
    try {
      fs.renameSync(tmp, classDir);
    } catch (err) {
      // Another process compiled the same hash meanwhile: keep its copy.
      if (!fs.existsSync(marker)) throw err;
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return { classDir, classpath, jarsDir, compiled: true, compileMs: Date.now() - started };
}

/**
 * Runs the Java reader; calls onLine(line) with each raw JSON line of its stdout (records and the summary).
 * Resolves with the parsed summary line; rejects with the stderr tail on a non-zero exit, a missing summary, or
 * when timeoutMs (+ 15 s for JVM start-up) passes (the child is killed).
 */
async function runReader({ brokers, topics, timeoutMs = DEFAULT_TIMEOUT_MS }, onLine) {
  if (!Array.isArray(brokers) || brokers.length === 0) throw new TypeError('brokers must be a non-empty array');
  if (!Array.isArray(topics) || topics.length === 0) throw new TypeError('topics must be a non-empty array');
  const { classpath } = await ensureCompiled();
  const args = [
    ...JVM_OPTIONS,
    `-Dlog4j2.configurationFile=${LOG_CONFIG}`,
    `-Dverify.timeoutMs=${Math.max(0, Math.floor(timeoutMs))}`,
    '-cp',
    classpath,
    MAIN_CLASS,
    brokers.join(','),
    ...topics,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn('java', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let summary = null;
    let failure = null;
    let timedOut = false;
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (s) => {
      stderr = (stderr + s).slice(-16384);
    });
    const rl = readline.createInterface({ input: child.stdout, crlfDelay: Infinity });
    rl.on('line', (line) => {
      if (failure || line === '') return;
      if (line.startsWith('{"done":')) {
        try {
          summary = JSON.parse(line);
        } catch (err) {
          failure = err;
        }
      }
      try {
        onLine(line);
      } catch (err) {
        failure = err;
        child.kill('SIGKILL');
      }
    });
    const killer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs + 15000);
    child.on('error', (err) => {
      clearTimeout(killer);
      reject(new Error(`could not start java: ${err.message}`));
    });
    // 'close' comes after stdout ended, so every line has been handled.
    child.on('close', (code, signal) => {
      clearTimeout(killer);
      if (failure) return reject(failure);
      if (timedOut) return reject(new Error(`java reader killed after ${timeoutMs + 15000} ms\n${stderr}`));
      if (code !== 0 || !summary) {
        return reject(new Error(`java reader exited with ${signal || code}${summary ? '' : ' (no summary)'}\n${stderr}`));
      }
      resolve(summary);
    });
  });
}

function decode(s) {
  return s === null ? null : Buffer.from(s, 'base64');
}

async function readCommittedDetailed(options) {
  const started = Date.now();
  const records = [];
  const summary = await runReader(options, (line) => {
    if (line.startsWith('{"done":')) return;
    const r = JSON.parse(line);
    records.push({
      topic: r.topic,
      partition: r.partition,
      offset: r.offset,
      key: decode(r.key),
      value: decode(r.value),
      headers: r.headers.map(([name, value]) => [name, decode(value)]),
      timestamp: r.timestamp,
    });
  });
  return { records, counts: summary.counts, endOffsets: summary.endOffsets, ms: Date.now() - started };
}

async function readCommitted(options) {
  return (await readCommittedDetailed(options)).records;
}

module.exports = { readCommitted, readCommittedDetailed, ensureCompiled, kafkaJarsDir, runReader };

async function main(argv) {
  const topics = [];
  let brokers = null;
  let timeoutMs = DEFAULT_TIMEOUT_MS;
  let compileOnly = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--brokers') brokers = argv[++i];
    else if (a.startsWith('--brokers=')) brokers = a.slice(10);
    else if (a === '--timeout-ms') timeoutMs = Number(argv[++i]);
    else if (a.startsWith('--timeout-ms=')) timeoutMs = Number(a.slice(13));
    else if (a === '--compile-only') compileOnly = true;
    else if (a === '-h' || a === '--help') {
      process.stdout.write(
        'usage: java-reader.js --brokers host:port[,...] [--timeout-ms N] <topic>...\n       java-reader.js --compile-only\n',
      );
      return 0;
    } else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else topics.push(a);
  }
  if (compileOnly) {
    const c = await ensureCompiled();
    process.stderr.write(`${c.compiled ? `compiled in ${c.compileMs} ms` : 'already compiled'}: ${c.classDir}\n`);
    return 0;
  }
  if (!brokers || topics.length === 0 || !Number.isFinite(timeoutMs)) {
    throw new Error('usage: java-reader.js --brokers host:port[,...] [--timeout-ms N] <topic>...');
  }
  const summary = await runReader({ brokers: brokers.split(','), topics, timeoutMs }, (line) => {
    process.stdout.write(`${line}\n`);
  });
  process.stderr.write(`read ${JSON.stringify(summary.counts)}\n`);
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`java-reader: ${err.message}\n`);
      process.exitCode = 1;
    },
  );
}
