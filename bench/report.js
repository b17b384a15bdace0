'use strict';
/**
 * The bench's outputs: terminal tables, Markdown, the targets and SVG charts. A variant that ran in several rounds
 * is one entry: each figure its median over the rounds, `spread[figure]` its min, max and ± % of the median (half
 * the range), and `rounds` each round's raw figures.
 */

const fmt = (v, digits = 0) => (v === undefined || v === null || Number.isNaN(v) ? '-' : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));

// --- rounds: medians and spreads ---

const get = (object, path) => path.split('.').reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), object);

/** Sets a figure at a path, copying the objects on the way (they may be a round's own). */
function set(object, path, value) {
  const keys = path.split('.');
  let o = object;
  for (const k of keys.slice(0, -1)) {
    o[k] = { ...(o[k] ?? {}) };
    o = o[k];
  }
  o[keys[keys.length - 1]] = value;
}

function median(values) {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return undefined;
  const mid = Math.floor(xs.length / 2);
  return xs.length % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

/** Median, min, max of the finite values and the spread as ± % of the median (half the range); undefined if none. */
function spreadOf(values, center) {
  const xs = values.filter((v) => Number.isFinite(v));
  if (xs.length === 0) return undefined;
  const m = center ?? median(xs);
  const min = Math.min(...xs);
  const max = Math.max(...xs);
  return { n: xs.length, median: m, min, max, pct: m ? ((max - min) / 2 / Math.abs(m)) * 100 : 0 };
}

/** The figures of a throughput run (consumer variants and publishers) that get a median and a spread. */
const FIGURES = ['recordsPerSecond', 'startupSeconds', 'totalSeconds', 'cpuSeconds', 'cpuUsPerRecord.variant', 'cpuUsPerRecord.broker', 'cpuUsPerRecord.machine', 'peakRssMb', 'pgTransactions', 'kafkaMarkers', 'outboxLatency.achievedRate', 'outboxLatency.published', 'outboxLatency.matched', 'outboxLatency.p50', 'outboxLatency.p99', 'outboxLatency.max'];

/** The figures of a latency phase that get a median and a spread. */
const LATENCY_FIGURES = ['rate', 'achievedRate', 'published', 'matched', 'missing', 'unmatchedOutputs', 'outputsReceived', 'p50', 'p99', 'max', 'mean', 'toProduced.p50', 'toProduced.p99', 'toProduced.max', 'producedToVisible.p50', 'producedToVisible.p99', 'producedToVisible.max', 'recordsPerMarker', 'cpuSeconds', 'benchCpuSeconds', 'pgTransactions', 'kafkaMarkers', 'startupSeconds', 'drainSeconds', 'wallSeconds'];

/**
 * One entry from the runs of a variant (one or more rounds): the first run's other fields (without its samples),
 * each figure the median of the runs, `spread` per figure, and `rounds`, the runs as measured.
 */
function aggregate(runs, figures = FIGURES) {
  const [first] = runs;
  const out = { ...first };
  delete out.samples;
  delete out.round;
  delete out.timeline;
  out.spread = {};
  for (const path of figures) {
    if (get(first, path) === undefined && runs.every((r) => get(r, path) === undefined)) continue;
    const s = spreadOf(runs.map((r) => get(r, path)));
    set(out, path, s?.median);
    if (s) out.spread[path] = { min: s.min, max: s.max, pct: s.pct, n: s.n };
  }
  out.rounds = runs;
  return out;
}

/** A latency point (a variant at one rate) over its rounds; complete when every round matched every output. */
function aggregateLatency(phases) {
  const withMarkers = phases.map((p) => ({ ...p, recordsPerMarker: recordsPerMarker(p) }));
  const out = { ...aggregate(withMarkers, LATENCY_FIGURES), complete: phases.every((p) => p.missing === 0 && p.matched > 0) };
  // A round's own: its raw samples' files, its warm-up.
  delete out.files;
  delete out.warmup;
  return out;
}

const runsOf = (entry) => entry.rounds ?? [entry];

/** A figure per round (the median when a variant ran more than once in a round). */
function perRound(entry, path) {
  const byRound = new Map();
  for (const run of runsOf(entry)) {
    const v = get(run, path);
    if (!Number.isFinite(v)) continue;
    const round = run.round ?? 1;
    if (!byRound.has(round)) byRound.set(round, []);
    byRound.get(round).push(v);
  }
  return new Map([...byRound].map(([round, values]) => [round, median(values)]));
}

/** a / b per round; a variant that ran once (B, C, DJ...) is set against every round of the other. */
function perRoundRatios(a, b, path, pathB = path) {
  const ra = perRound(a, path);
  const rb = perRound(b, pathB);
  const only = (m) => (m.size === 1 ? [...m.values()][0] : undefined);
  const rounds = [...new Set([...ra.keys(), ...rb.keys()])].sort((x, y) => x - y);
  return rounds.map((r) => (ra.get(r) ?? only(ra)) / (rb.get(r) ?? only(rb))).filter((v) => Number.isFinite(v));
}

/** "±4%" after a median of several runs; nothing after a single run. */
function spreadSuffix(s) {
  return s && s.n > 1 ? ` ±${fmt(s.pct, s.pct < 10 ? 1 : 0)}%` : '';
}

const cell = (r, path, digits) => `${fmt(get(r, path), digits)}${spreadSuffix(r.spread?.[path])}`;
const rangeCell = (r, path, digits) => {
  const s = r.spread?.[path];
  return s && s.n > 1 ? `${fmt(s.min, digits)}–${fmt(s.max, digits)}` : fmt(get(r, path), digits);
};
const severalRounds = (entries) => entries.some((e) => (e.rounds?.length ?? 1) > 1);

// --- the throughput table ---

const COLUMNS = [
  ['variant', (r) => r.variant],
  ['runs', (r) => String(r.rounds?.length ?? 1)],
  ['records', (r) => fmt(r.records)],
  ['records/s', 'recordsPerSecond', 0],
  ['start-up s', 'startupSeconds', 1],
  ['total s', 'totalSeconds', 1],
  ['CPU s', 'cpuSeconds', 1],
  ['CPU µs/rec', 'cpuUsPerRecord.variant', 0],
  ['broker µs/rec', 'cpuUsPerRecord.broker', 0],
  ['machine µs/rec', 'cpuUsPerRecord.machine', 0],
  ['peak RSS MB', 'peakRssMb', 0],
  ['PG xacts', 'pgTransactions', 0],
  ['Kafka markers', 'kafkaMarkers', 0],
];

function columnsFor(entries) {
  return severalRounds(entries) ? COLUMNS : COLUMNS.filter(([name]) => name !== 'runs');
}

function rows(entries, columns, range = false) {
  return entries.map((r) => columns.map(([, path, digits]) => (typeof path === 'function' ? path(r) : range ? rangeCell(r, path, digits) : cell(r, path, digits))));
}

function textTable(columns, body) {
  const widths = columns.map(([name], i) => Math.max(name.length, ...body.map((r) => r[i].length)));
  const line = (values) => values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [line(columns.map(([name]) => name)), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

function markdownTable(columns, body) {
  return [`| ${columns.map(([name]) => name).join(' | ')} |`, `|${columns.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`, ...body.map((r) => `| ${r.join(' | ')} |`)];
}

/** Medians (± the spread) of every variant; with several rounds, a second table of each figure's min–max. */
function table(publishers, results) {
  const entries = [...publishers, ...results];
  const columns = columnsFor(entries);
  const main = textTable(columns, rows(entries, columns));
  if (!severalRounds(entries)) return main;
  return `${main}\n\nmin–max over the runs:\n${textTable(columns, rows(entries, columns, true))}`;
}

// --- ratios and targets ---

/**
 * The throughput ratios: each the ratio of the two medians, with the ratio per round beside it (its min–max and
 * spread); `target` where the issue set one. Undefined when a variant did not run.
 */
function ratios(results, publishers) {
  const all = [...results, ...publishers];
  const entry = (v) => all.find((r) => r.variant === v);
  const ratio = (a, b, target) => {
    const [x, y] = [entry(a), entry(b)];
    if (!x?.recordsPerSecond || !y?.recordsPerSecond) return undefined;
    const value = x.recordsPerSecond / y.recordsPerSecond;
    const values = perRoundRatios(x, y, 'recordsPerSecond');
    const s = spreadOf(values, value);
    return { name: `${a}/${b}`, value, target, values, min: s?.min, max: s?.max, spreadPct: s?.pct };
  };
  // K/K1 has no target: what key lanes gain for a handler that waits on a lookup.
  // F/E: what 1% of records failing for good costs in throughput.
  return [ratio('E', 'A', 0.5), ratio('F', 'E'), ratio('G', 'E'), ratio('E', 'AT'), ratio('AT', 'A'), ratio('D', 'J', 1), ratio('D', 'B', 3), ratio('D', 'C', 10), ratio('P', 'P0', 0.5), ratio('O', 'P0', 0.5), ratio('K', 'K1'), ratio('DJ', 'D'), ratio('AX', 'A'), ratio('DX', 'D'), ratio('EX', 'E'), ratio('EX', 'AX', 0.5)].filter(Boolean);
}

/** The ratios without a target, one line each (the targets are in the targets' block). */
function ratioLines(list) {
  return list.filter((r) => r.target === undefined).map((r) => `${r.name} = ${r.value.toFixed(3)}${r.values.length > 1 ? ` (per round ${r.min.toFixed(3)}–${r.max.toFixed(3)}, ±${fmt(r.spreadPct, 1)}%)` : ''}`);
}

/**
 * A target: its figure's median (or `center`, the ratio of two medians) and spread over `values` (one per round),
 * met or missed; `met` null when it was not measured, or not as the target says (`comparable: false`).
 */
function target(name, kind, op, limit, unit, values, { center, complete = true, comparable = true, note } = {}) {
  const s = spreadOf(values, center);
  const m = s?.median;
  const holds = op === '≥' ? m >= limit : op === '<' ? m < limit : m <= limit;
  return { name, kind, op, target: limit, unit, median: m, min: s?.min, max: s?.max, spreadPct: s?.pct, runs: s?.n ?? 0, values, complete, met: m === undefined || !comparable ? null : complete && holds, note };
}

/** Throughput: the ratios that have a target. */
function throughputTargets(list) {
  return list.filter((r) => r.target !== undefined).map((r) => target(`${r.name} records/s`, 'throughput', '≥', r.target, '', r.values, { center: r.value }));
}

/** CPU per record: the ratio per round, its median and spread. */
function cpuTargets(results) {
  const entry = (v) => results.find((r) => r.variant === v);
  const out = [];
  const cpu = (a, b, which, limit) => {
    const [x, y] = [entry(a), entry(b)];
    if (get(x, `cpuUsPerRecord.${which}`) === undefined || !get(y, `cpuUsPerRecord.${which}`)) return;
    const values = perRoundRatios(x, y, `cpuUsPerRecord.${which}`);
    const note = `${a} ${fmt(get(x, `cpuUsPerRecord.${which}`))} µs, ${b} ${fmt(get(y, `cpuUsPerRecord.${which}`))} µs`;
    out.push(target(`${a}/${b} ${which === 'variant' ? 'process' : which} CPU µs/record`, 'cpu', '≤', limit, '', values, { note }));
  };
  cpu('E', 'AT', 'variant', 1.5);
  cpu('D', 'J', 'machine', 1);
  cpu('DJ', 'D', 'variant', 1);
  for (const [v] of DATA_LAYERS.slice(1)) cpu(v, entry('DT') ? 'DT' : 'D', 'variant', DATA_LAYER_TARGET);
  return out;
}
/** F's handler calls: per failing record (its in-place attempts), and extra calls of records that never failed. */
function handlerCallsLines(results) {
  return results
    .filter((r) => r.handlerCalls)
    .map((r) => {
      const c = r.handlerCalls;
      return `${r.variant} handler calls: ${fmt(c.failing)} of ${fmt(c.records)} records failing, ${fmt(c.callsPerFailingRecord, 2)} calls per failing record; ${fmt(c.extraCallsPerThousand, 1)} extra calls per 1,000 records by records that never failed`;
    });
}

/** JSON against Avro in consumer-app (DJ against D): CPU µs per record of the consumer process. */
function formatLines(results) {
  const d = results.find((r) => r.variant === 'D')?.cpuUsPerRecord?.variant;
  const dj = results.find((r) => r.variant === 'DJ')?.cpuUsPerRecord?.variant;
  if (d === undefined || dj === undefined) return [];
  return [`consumer-app CPU per record: Avro (D) ${fmt(d)} µs, JSON (DJ) ${fmt(dj)} µs (JSON/Avro = ${(dj / d).toFixed(2)}; target ≤ 1: ${dj <= d ? 'met' : 'missed'})`];
}

/** The data layers' cost (issue 48): D's handler on TypeORM, Prisma, Drizzle and Kysely, CPU µs per record of the process. */
const DATA_LAYERS = [
  ['DT', 'TypeORM'],
  ['DP', 'Prisma'],
  ['DD', 'Drizzle'],
  ['DK', 'Kysely'],
];
const DATA_LAYER_TARGET = 1.2;

/** A variant's CPU µs per record; the median of its rows when it ran more than once (`--variants DT,DP,DT,DP`). */
function medianCpu(results, v) {
  const xs = results.filter((r) => r.variant === v && r.cpuUsPerRecord?.variant !== undefined).map((r) => r.cpuUsPerRecord.variant).sort((a, b) => a - b);
  if (xs.length === 0) return undefined;
  const mid = Math.floor(xs.length / 2);
  return xs.length % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

function dataLayerLines(results) {
  const cpu = (v) => medianCpu(results, v);
  const runs = Math.max(...['D', ...DATA_LAYERS.map(([v]) => v)].map((v) => results.filter((r) => r.variant === v).length));
  const typeorm = cpu('DT');
  const d = cpu('D');
  const measured = DATA_LAYERS.filter(([v]) => cpu(v) !== undefined);
  if (measured.length === 0) return [];
  const against = (x, base) => (base === undefined ? '' : `${(x / base).toFixed(2)} × `);
  const parts = measured.map(([v, name]) => {
    const x = cpu(v);
    const ratios = [typeorm !== undefined && v !== 'DT' ? `${against(x, typeorm)}DT` : undefined, d !== undefined ? `${against(x, d)}D` : undefined].filter(Boolean);
    return `${name} (${v}) ${fmt(x)} µs${ratios.length ? ` (${ratios.join(', ')})` : ''}`;
  });
  const line = `data layers, D's handler, CPU per record${runs > 1 ? ' (the median of each variant\'s runs)' : ''}: ${d === undefined ? '' : `consumer-app (D) ${fmt(d)} µs, `}${parts.join(', ')}`;
  const base = typeorm ?? d;
  if (base === undefined) return [line];
  const over = measured.filter(([v]) => v !== 'DT' && cpu(v) > DATA_LAYER_TARGET * base).map(([v]) => v);
  return [`${line}; target ≤ ${DATA_LAYER_TARGET} × ${typeorm !== undefined ? 'DT' : 'D'}: ${over.length ? `missed by ${over.join(', ')}` : 'met'}`];
}


// --- latency (bench/latency.js) ---

/** The issue's latency targets: p99 end-to-end (read committed) at a quarter and at half of D's peak. */
const LATENCY_TARGETS = { D: 250, E: 100 };
const TARGET_FRACTIONS = [0.25, 0.5];
const FRACTION_NAMES = { 0.25: 'a quarter', 0.5: 'half', 0.75: 'three quarters' };
const FRACTION_SHORT = { 0.25: '¼', 0.5: '½', 0.75: '¾' };

const ms = (v) => fmt(v);

/** Where a latency point was measured, short: "1,900 (¼ D)", "21 (½ own)", "1,000"; `of` names whose peak. */
function rateLabel(p) {
  if (p.fraction === undefined) return fmt(p.rate);
  return `${fmt(p.rate)} (${FRACTION_SHORT[p.fraction] ?? p.fraction} ${p.of})`;
}

/** The same, in words. */
function rateWords(p) {
  if (p.fraction === undefined) return `${fmt(p.rate)} records/s (--latency-rate)`;
  return `${FRACTION_NAMES[p.fraction] ?? `${p.fraction} ×`} of ${p.of === 'own' ? 'its own' : `${p.of}'s`} peak (${fmt(p.rate)} records/s)`;
}

const pair = (p, a, b) => `${cell(p, a, 0)} / ${cell(p, b, 0)}`;
const LATENCY_COLUMNS = [
  ['variant', (p) => p.variant],
  ['runs', (p) => String(p.rounds?.length ?? 1)],
  ['rate asked/s', (p) => rateLabel(p)],
  ['achieved/s', 'achievedRate', 0],
  ['matched', (p) => `${fmt(sumOf(p, 'matched'))} / ${fmt(sumOf(p, 'published'))}`],
  ['p50 ms', 'p50', 0],
  ['p99 ms', 'p99', 0],
  ['max ms', 'max', 0],
  ['to produced p50/p99', (p) => pair(p, 'toProduced.p50', 'toProduced.p99')],
  ['to visible p50/p99', (p) => pair(p, 'producedToVisible.p50', 'producedToVisible.p99')],
  ['records/marker', 'recordsPerMarker', 1],
  ['CPU s', 'cpuSeconds', 1],
  ['pub+reader CPU s', 'benchCpuSeconds', 1],
];
const sumOf = (p, key) => (p.rounds ?? [p]).reduce((n, r) => n + (r[key] ?? 0), 0);

/**
 * Output records per transaction marker in the latency phase: a transaction writes one marker on each output
 * partition it wrote to (the library and C: one input partition's unit, whose outputs here go to one partition;
 * J: one poll over every partition), so this is how many records a commit made visible on a partition at once.
 */
function recordsPerMarker(l) {
  return l.kafkaMarkers ? l.outputsReceived / l.kafkaMarkers : undefined;
}

/** Every latency point of every variant, in the order of the variants, then of the rates. */
function latencyPoints(results) {
  return results.flatMap((r) => (r.latencyRates ?? []).map((p) => ({ ...p, variant: r.variant })));
}

function latencyTable(results) {
  const points = latencyPoints(results);
  const columns = severalRounds(points) ? LATENCY_COLUMNS : LATENCY_COLUMNS.filter(([name]) => name !== 'runs');
  const main = textTable(columns, rows(points, columns));
  if (!severalRounds(points)) return main;
  return `${main}\n\nmin–max over the runs:\n${textTable(columns, rows(points, columns, true))}`;
}

/** One line for the log as a phase ends. */
function latencyLine(l) {
  return `latency p50 ${ms(l.p50)} ms, p99 ${ms(l.p99)} ms, max ${ms(l.max)} ms at ${fmt(l.achievedRate)} records/s (asked ${fmt(l.rate)}); ${fmt(l.matched)} of ${fmt(l.published)} outputs matched`;
}

/**
 * D's and E's p99 at a quarter and at half of D's peak (or at --latency-rate), each the median of its rounds, met
 * when every round matched every output and the median is within the target; J's p99 at the same rate beside it.
 * And the outbox relay's, from a writer's COMMIT to the event visible read-committed, at 1,000 events/s.
 */
function latencyTargets(results, publishers) {
  const out = [];
  const j = results.find((r) => r.variant === 'J');
  for (const [variant, limit] of Object.entries(LATENCY_TARGETS)) {
    for (const p of results.find((r) => r.variant === variant)?.latencyRates ?? []) {
      if (p.fraction !== undefined && !TARGET_FRACTIONS.includes(p.fraction)) continue;
      const jp = j?.latencyRates?.find((q) => q.rate === p.rate)?.p99;
      const note = [`p50 ${ms(p.p50)} ms`, jp === undefined ? undefined : `J's p99 ${ms(jp)} ms`, p.complete ? undefined : 'outputs missing'].filter(Boolean).join(', ');
      out.push(target(`${variant} p99 at ${rateWords(p)}`, 'latency', '≤', limit, ' ms', p.rounds.map((r) => r.p99), { complete: p.complete, note }));
    }
  }
  const o = publishers.find((p) => p.variant === 'O');
  if (o?.outboxLatency) {
    const runs = runsOf(o).map((r) => r.outboxLatency);
    const complete = runs.every((l) => l.matched === l.published && l.matched > 0);
    out.push(target('O p99 from COMMIT to visible at 1,000 events/s', 'latency', '≤', 100, ' ms', runs.map((l) => l.p99), { complete, note: [`p50 ${ms(o.outboxLatency.p50)} ms at ${fmt(o.outboxLatency.achievedRate)} events/s`, complete ? undefined : 'events missing'].filter(Boolean).join(', ') }));
  }
  return out;
}
/** The spool's catch-up after an outage, in one line. */
function spoolCatchUpLine(c) {
  const s = (v) => (v === undefined ? '-' : `${v.toFixed(1)} s`);
  return `spool catch-up at ${fmt(c.rate)} publishes/s, broker away ${c.outageSeconds.toFixed(1)} s: ${fmt(c.spooled)} of ${fmt(c.published)} spooled (at most ${fmt(c.spoolPeak)} at once), every publish live again ${c.liveAgainSeconds === undefined ? 'without spooling' : `${s(c.liveAgainSeconds)} after Kafka's return`}, spool empty ${s(c.spoolEmptySeconds)} after; ${fmt(c.missing)} missing, ${fmt(c.orderViolations)} out of per-key order, ${fmt(c.copies)} extra copies`;
}

/** The issue's target: live sends again within 30 s of Kafka's return, nothing lost, per-key order kept. */
function spoolCatchUpTargets(publishers) {
  const c = publishers.find((p) => p.variant === 'P')?.spoolCatchUp;
  if (!c) return [];
  const live = c.liveAgainSeconds ?? 0;
  return [{ variant: 'P', spool: true, target: 30, live, complete: c.missing === 0 && c.orderViolations === 0, met: live <= 30 && c.missing === 0 && c.orderViolations === 0, line: spoolCatchUpLine(c) }];
}


/** consumer-app over a backlog (bench/backlog-memory.js): peak RSS under 300 MB over 1,000,000 records at 12 partitions. */
const MEMORY_TARGET = { mb: 300, records: 1000000, partitions: 12 };

function memoryLine(m) {
  if (m.error) return `memory over a backlog: failed: ${m.error}`;
  return `memory over a backlog: consumer-app over ${fmt(m.records)} records at ${m.partitions} partitions, peak RSS ${fmt(m.peakRssMb)} MB, ${fmt(m.recordsPerSecond)} records/s, ${fmt(m.seconds, 1)} s`;
}

function memoryTargets(memory) {
  if (!memory || memory.error) return memory?.error ? [target(`consumer-app peak RSS over a ${fmt(MEMORY_TARGET.records)}-record backlog at ${MEMORY_TARGET.partitions} partitions`, 'memory', '<', MEMORY_TARGET.mb, ' MB', [], { note: `failed: ${memory.error}` })] : [];
  const comparable = memory.records >= MEMORY_TARGET.records && memory.partitions === MEMORY_TARGET.partitions;
  return [target(`consumer-app peak RSS over a ${fmt(MEMORY_TARGET.records)}-record backlog at ${MEMORY_TARGET.partitions} partitions`, 'memory', '<', MEMORY_TARGET.mb, ' MB', [memory.peakRssMb], { comparable, note: `${fmt(memory.records)} records at ${memory.partitions} partitions, ${fmt(memory.recordsPerSecond)} records/s${comparable ? '' : ': not the target\'s backlog'}` })];
}

function spoolTargets(publishers) {
  return spoolCatchUpTargets(publishers).map((t) => target("P's spool: every publish live again after Kafka's return (nothing lost, per-key order)", 'spool', '≤', t.target, ' s', [t.live], { complete: t.complete, note: t.complete ? undefined : 'records missing or out of order' }));
}

/** Every target of the run, for the block at the end of the output and `targets` in results.json. */
function targets(results, publishers, list, memory) {
  return [...throughputTargets(list), ...cpuTargets(results), ...latencyTargets(results, publishers), ...spoolTargets(publishers), ...memoryTargets(memory)];
}

function targetFigure(t, v) {
  if (v === undefined) return '-';
  return t.unit === '' ? v.toFixed(2) : `${fmt(v, t.unit === ' s' ? 1 : 0)}${t.unit}`;
}

const verdict = (t) => (t.met === true ? 'met' : t.met === false ? 'missed' : t.runs > 0 ? 'not comparable' : 'not measured');
const spreadText = (t) => (t.runs > 1 ? `${targetFigure(t, t.min)}–${targetFigure(t, t.max)} (±${fmt(t.spreadPct, t.spreadPct < 10 ? 1 : 0)}%) over ${t.runs} runs` : t.runs === 1 ? 'one run' : '-');

/** The targets' block: target, median, spread, met or missed. */
function targetLines(list) {
  return list.map((t) => `${t.name} ${t.op} ${t.target}${t.unit}: ${t.runs > 1 ? `median ${targetFigure(t, t.median)}, spread ${spreadText(t)}` : `${targetFigure(t, t.median)}, ${spreadText(t)}`}: ${verdict(t)}${t.note ? ` (${t.note})` : ''}`);
}

function targetMarkdown(list) {
  if (list.length === 0) return [];
  return ['## Targets', '', 'Each the median over the runs (a ratio of records/s: the ratio of the two medians; of CPU: the median of the ratio per round); spread: min–max and ± % of the median.', '', '| target | median | spread | |', '|---|---:|---|---|', ...list.map((t) => `| ${t.name} ${t.op} ${t.target}${t.unit} | ${targetFigure(t, t.median)} | ${spreadText(t)} | ${verdict(t)}${t.note ? ` (${t.note})` : ''} |`), ''];
}

// --- the steps of the slowest records (--tail-steps) ---

/** Per variant and rate with a step breakdown: the slowest 1% of its records against all, p50 / p90 of each step. */
function tailStepBlocks(results) {
  return latencyPoints(results)
    .filter((p) => p.tailSteps)
    .map((p) => {
      const t = p.tailSteps;
      const title = `tail steps of ${p.variant} at ${rateWords(p)}, ${t.phases} phase${t.phases === 1 ? '' : 's'}`;
      if (!t.slowest) return { title, missing: true, text: `${title}: no step log written (library without operations.stepLog?)` };
      const heading = `${title}: the slowest 1% by published → received (${fmt(t.slowest.records)} records, ${fmt(t.slowest.found)} found in ${fmt(t.units)} logged units) against all (${fmt(t.all.records)} records; of a sample of ${fmt(t.all.sampled)}, ${fmt(t.all.found)} found)`;
      const body = t.slowest.steps.map((s, i) => [s.step, `${fmt(s.p50, 1)} / ${fmt(s.p90, 1)}`, `${fmt(t.all.steps[i].p50, 1)} / ${fmt(t.all.steps[i].p90, 1)}`]);
      return { title, heading, columns: [['step'], ['slowest 1% p50 / p90 ms'], ['all p50 / p90 ms']], body };
    });
}

function tailStepLines(results) {
  return tailStepBlocks(results).flatMap((b) => (b.missing ? [b.text] : [b.heading, ...textTable(b.columns, b.body).split('\n').map((l) => `  ${l}`)]));
}

function tailStepMarkdown(results) {
  const blocks = tailStepBlocks(results);
  if (blocks.length === 0) return [];
  return ['## Steps of the slowest 1% (--tail-steps)', '', "Each slow record's unit of work in the library's step log (operations.stepLog), found by its input partition and offset; p50 / p90 of each step, ms.", '', ...blocks.flatMap((b, i) => (b.missing ? [`- ${b.text}`, ...(blocks[i + 1]?.missing ? [] : [''])] : [`${b.heading}:`, '', ...markdownTable(b.columns, b.body), '']))];
}

// --- Markdown ---

function latencyMarkdown(results) {
  const points = latencyPoints(results);
  if (points.length === 0) return [];
  const l = points[0].rounds?.[0] ?? points[0];
  const columns = severalRounds(points) ? LATENCY_COLUMNS : LATENCY_COLUMNS.filter(([name]) => name !== 'runs');
  return [
    `## Latency`,
    '',
    `Each variant again, one process, on fresh topics and database, at fixed rates (a quarter, a half and three quarters of D's median records/s above, the same for every variant; B and C at half their own; or --latency-rate); inputs published by a process of their own at a steady rate for ${l.warmupSeconds} s of warm-up (not counted) and ${l.seconds} s; latency = output received by a read_committed reader (a process of its own) − input published. "to produced": input published → the output's own CreateTime (the variant sent it); "to visible": that → received (the variant's commits, the transaction marker, the reader's fetch). records/marker: outputs per transaction marker, i.e. made visible on an output partition by one commit. CPU s: the variant's process; pub+reader: the publisher's and the reader's processes. Raw samples: latency/ beside this file.`,
    '',
    ...markdownTable(columns, rows(points, columns)),
    '',
    ...(severalRounds(points) ? ['min–max over the runs:', '', ...markdownTable(columns, rows(points, columns, true)), ''] : []),
  ];
}

function markdown(run, publishers, results, { ratios: list = [], targets: all = [], memory } = {}) {
  const entries = [...publishers, ...results];
  const columns = columnsFor(entries);
  const labels = entries.map((r) => `- **${r.variant}**: ${r.label.replace(/^\w+\. /, '')}`);
  return [
    `# Bench run ${run.id}`,
    '',
    `${run.date}: ${run.count} payments, ${run.partitions} partitions, ${run.rounds} round${run.rounds === 1 ? '' : 's'}; Node ${run.node}, Kafka ${run.kafka} (one broker), PostgreSQL ${run.postgres}; ${run.cpus} CPUs (${run.cpuModel}).`,
    '',
    ...(severalRounds(entries) ? [`Each figure the median of the variant's runs, ± half their range as a % of it (min–max in the second table).`, ''] : []),
    ...markdownTable(columns, rows(entries, columns)),
    '',
    ...(severalRounds(entries) ? ['min–max over the runs:', '', ...markdownTable(columns, rows(entries, columns, true)), ''] : []),
    ...labels,
    '',
    ...ratioLines(list).map((l) => `- ${l}`),
    ...handlerCallsLines(results).map((l) => `- ${l}`),
    ...formatLines(results).map((l) => `- ${l}`),
    ...dataLayerLines(results).map((l) => `- ${l}`),
    ...(memory ? [`- ${memoryLine(memory)}`] : []),
    '',
    ...latencyMarkdown(results),
    ...tailStepMarkdown(results),
    ...spoolCatchUpTargets(publishers).flatMap((t) => ['## Spool catch-up', '', `${t.line}: target (live again within ${t.target} s of Kafka's return, nothing lost, per-key order) ${t.met ? 'met' : 'missed'}.`, '']),
    ...targetMarkdown(all),
  ].join('\n');
}
function escape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Horizontal bars, one per variant, records/s on a linear scale (the median), a whisker from min to max over the rounds. */
function chart(title, entries) {
  const width = 760;
  const bar = 22;
  const pad = { left: 110, right: 90, top: 34, bottom: 16 };
  const height = pad.top + pad.bottom + entries.length * (bar + 8);
  const max = Math.max(1, ...entries.map((e) => Math.max(e.recordsPerSecond ?? 0, e.spread?.recordsPerSecond?.max ?? 0)));
  const w = (v) => ((v ?? 0) / max) * (width - pad.left - pad.right);
  const whisker = (s, y) => {
    if (!s || s.n < 2) return '';
    const [x1, x2, mid] = [pad.left + w(s.min), pad.left + w(s.max), y + bar / 2];
    return `<path d="M${x1.toFixed(1)},${mid} H${x2.toFixed(1)} M${x1.toFixed(1)},${mid - 5} V${mid + 5} M${x2.toFixed(1)},${mid - 5} V${mid + 5}" stroke="#222" stroke-width="1.2" fill="none"/>`;
  };
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${pad.left}" y="20" font-size="13">${escape(title)}: records/s</text>`,
    ...entries.map((e, i) => {
      const y = pad.top + i * (bar + 8);
      const color = /^P/.test(e.variant) ? '#7a7a7a' : e.variant.startsWith('A') ? '#999' : '#1f5fbf';
      return [
        `<text x="${pad.left - 8}" y="${y + bar / 2 + 4}" text-anchor="end">${escape(e.variant)}</text>`,
        `<rect x="${pad.left}" y="${y}" width="${w(e.recordsPerSecond).toFixed(1)}" height="${bar}" fill="${color}"/>`,
        whisker(e.spread?.recordsPerSecond, y),
        `<text x="${pad.left + Math.max(w(e.recordsPerSecond), w(e.spread?.recordsPerSecond?.max)) + 6}" y="${y + bar / 2 + 4}">${fmt(e.recordsPerSecond)}${spreadSuffix(e.spread?.recordsPerSecond)}</text>`,
      ].join('');
    }),
    '</svg>',
  ];
  return parts.join('\n');
}

/** Per variant with a latency phase at half the peak: a bar to p99, p50 marked on it, the target (if any) as a red tick. */
function latencyChart(title, results) {
  const entries = results.filter((r) => r.latency && r.latency.p99 !== undefined);
  const width = 760;
  const bar = 22;
  const pad = { left: 110, right: 150, top: 34, bottom: 16 };
  const height = pad.top + pad.bottom + entries.length * (bar + 8);
  const max = Math.max(1, ...entries.map((e) => Math.max(e.latency.p99, LATENCY_TARGETS[e.variant] ?? 0)));
  const x = (v) => pad.left + ((v ?? 0) / max) * (width - pad.left - pad.right);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${pad.left}" y="20" font-size="13">${escape(title)}: p50 (dark) and p99 (bar), ms; target in red</text>`,
    ...entries.map((e, i) => {
      const y = pad.top + i * (bar + 8);
      const l = e.latency;
      const target = LATENCY_TARGETS[e.variant];
      return [
        `<text x="${pad.left - 8}" y="${y + bar / 2 + 4}" text-anchor="end">${escape(e.variant)}</text>`,
        `<rect x="${pad.left}" y="${y}" width="${(x(l.p99) - pad.left).toFixed(1)}" height="${bar}" fill="#9bb8e6"/>`,
        `<rect x="${pad.left}" y="${y}" width="${(x(l.p50) - pad.left).toFixed(1)}" height="${bar}" fill="#1f5fbf"/>`,
        target ? `<line x1="${x(target).toFixed(1)}" x2="${x(target).toFixed(1)}" y1="${y - 3}" y2="${y + bar + 3}" stroke="#d00" stroke-width="2"/>` : '',
        `<text x="${x(Math.max(l.p99, target ?? 0)) + 6}" y="${y + bar / 2 + 4}">${ms(l.p50)} / ${ms(l.p99)} ms</text>`,
      ].join('');
    }),
    '</svg>',
  ];
  return parts.join('\n');
}

/** A variant's colour in the line chart: the bench's blues for the library, greys for plain KafkaJS, the rest apart. */
const LINE_COLOURS = { A: '#7a7a7a', AT: '#b0b0b0', AX: '#4d4d4d', D: '#1f5fbf', DX: '#6f98d8', DX4: '#0b2f6b', E: '#2a9d4b', EX: '#86c99a', J: '#d9822b', B: '#8e44ad', C: '#c0392b', K1: '#16a085', K: '#7f8c00' };
const EXTRA_COLOURS = ['#e377c2', '#17becf', '#bcbd22', '#8c564b'];

/** Round numbers for an axis from 0 to `max` or just past it. */
function ticks(max) {
  const step0 = max / 5;
  const mag = 10 ** Math.floor(Math.log10(step0 || 1));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= step0) ?? mag * 10;
  const out = [0];
  while (out[out.length - 1] < max) out.push(out.length * step);
  return out;
}

/**
 * Latency against rate: p99 (solid) and p50 (dashed) of each variant at the rates it was measured at (the achieved
 * rate, medians over the rounds); the latency targets as thin red lines.
 */
function latencyRateChart(title, results) {
  const series = results
    .map((r, i) => ({ variant: r.variant, colour: LINE_COLOURS[r.variant] ?? EXTRA_COLOURS[i % EXTRA_COLOURS.length], points: (r.latencyRates ?? []).filter((p) => p.p99 !== undefined).map((p) => ({ x: p.achievedRate ?? p.rate, p50: p.p50, p99: p.p99 })).sort((a, b) => a.x - b.x) }))
    .filter((s) => s.points.length > 0);
  const width = 900;
  const height = 560;
  const pad = { left: 70, right: 150, top: 40, bottom: 50 };
  const targetsShown = Object.entries(LATENCY_TARGETS).filter(([v]) => series.some((s) => s.variant === v));
  const xTicks = ticks(Math.max(1, ...series.flatMap((s) => s.points.map((p) => p.x))) * 1.05);
  const yTicks = ticks(Math.max(1, ...series.flatMap((s) => s.points.map((p) => p.p99)), ...targetsShown.map(([, t]) => t)) * 1.05);
  const [xMax, yMax] = [xTicks[xTicks.length - 1], yTicks[yTicks.length - 1]];
  const x = (v) => pad.left + (v / xMax) * (width - pad.left - pad.right);
  const y = (v) => height - pad.bottom - (v / yMax) * (height - pad.top - pad.bottom);
  const path = (points, key) => points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(p.x).toFixed(1)},${y(p[key]).toFixed(1)}`).join(' ');
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${pad.left}" y="22" font-size="13">${escape(title)}: p99 (solid) and p50 (dashed), ms, against records/s</text>`,
    ...xTicks.map((v) => `<line x1="${x(v).toFixed(1)}" x2="${x(v).toFixed(1)}" y1="${pad.top}" y2="${height - pad.bottom}" stroke="#eee"/><text x="${x(v).toFixed(1)}" y="${height - pad.bottom + 16}" text-anchor="middle">${fmt(v)}</text>`),
    ...yTicks.map((v) => `<line x1="${pad.left}" x2="${width - pad.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/><text x="${pad.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${fmt(v)}</text>`),
    `<line x1="${pad.left}" x2="${pad.left}" y1="${pad.top}" y2="${height - pad.bottom}" stroke="#333"/>`,
    `<line x1="${pad.left}" x2="${width - pad.right}" y1="${height - pad.bottom}" y2="${height - pad.bottom}" stroke="#333"/>`,
    `<text x="${((pad.left + width - pad.right) / 2).toFixed(0)}" y="${height - 12}" text-anchor="middle">records/s (achieved)</text>`,
    `<text x="16" y="${((pad.top + height - pad.bottom) / 2).toFixed(0)}" text-anchor="middle" transform="rotate(-90 16 ${((pad.top + height - pad.bottom) / 2).toFixed(0)})">latency, ms</text>`,
    ...targetsShown.map(([v, t]) => `<line x1="${pad.left}" x2="${width - pad.right}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" stroke="#d00" stroke-width="1"/><text x="${pad.left + 6}" y="${(y(t) - 4).toFixed(1)}" fill="#d00">target of ${escape(v)}: p99 ≤ ${t} ms</text>`),
    ...series.flatMap((s) => [
      `<path d="${path(s.points, 'p99')}" fill="none" stroke="${s.colour}" stroke-width="2"/>`,
      `<path d="${path(s.points, 'p50')}" fill="none" stroke="${s.colour}" stroke-width="1.5" stroke-dasharray="5,4"/>`,
      ...s.points.map((p) => `<circle cx="${x(p.x).toFixed(1)}" cy="${y(p.p99).toFixed(1)}" r="3" fill="${s.colour}"/><circle cx="${x(p.x).toFixed(1)}" cy="${y(p.p50).toFixed(1)}" r="2.5" fill="white" stroke="${s.colour}"/>`),
    ]),
    ...series.map((s, i) => {
      const ly = pad.top + 10 + i * 20;
      const lx = width - pad.right + 16;
      return `<line x1="${lx}" x2="${lx + 22}" y1="${ly}" y2="${ly}" stroke="${s.colour}" stroke-width="2"/><line x1="${lx + 26}" x2="${lx + 48}" y1="${ly}" y2="${ly}" stroke="${s.colour}" stroke-width="1.5" stroke-dasharray="5,4"/><text x="${lx + 54}" y="${ly + 4}">${escape(s.variant)}</text>`;
    }),
    '</svg>',
  ];
  return parts.join('\n');
}

module.exports = {
  aggregate,
  aggregateLatency,
  median,
  spreadOf,
  table,
  markdown,
  ratios,
  ratioLines,
  targets,
  targetLines,
  handlerCallsLines,
  formatLines,
  dataLayerLines,
  chart,
  latencyTable,
  latencyLine,
  latencyChart,
  latencyRateChart,
  tailStepLines,
  memoryLine,
  spoolCatchUpLine,
};
