'use strict';
/** What every bench variant reads from its environment, and its exit on SIGTERM. */

function benchEnv() {
  const need = (name) => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is required (bench/bench.js sets it)`);
    return value;
  };
  return {
    brokers: need('BENCH_BROKERS').split(','),
    input: need('BENCH_INPUT'),
    output: need('BENCH_OUTPUT'),
    group: need('BENCH_GROUP'),
    prefix: process.env.BENCH_PREFIX ?? '',
    databaseUrl: process.env.DATABASE_URL,
    partitions: Number(process.env.BENCH_PARTITIONS ?? '6'),
  };
}

/** Runs `stop` once on SIGTERM/SIGINT, then exits. */
function onStop(stop) {
  let stopping = false;
  const handler = () => {
    if (stopping) return;
    stopping = true;
    Promise.resolve()
      .then(stop)
      .then(
        () => process.exit(0),
        (err) => {
          console.error(err);
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

module.exports = { benchEnv, onStop };
