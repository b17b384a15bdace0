'use strict';
/** The bench's outputs: terminal tables, Markdown, the targets (ratios, latency) and SVG bar charts. */

const fmt = (v, digits = 0) => (v === undefined || v === null || Number.isNaN(v) ? '-' : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));

const COLUMNS = [
  ['variant', (r) => r.variant],
  ['records', (r) => fmt(r.records)],
  ['records/s', (r) => fmt(r.recordsPerSecond)],
  ['start-up s', (r) => fmt(r.startupSeconds, 1)],
  ['total s', (r) => fmt(r.totalSeconds, 1)],
  ['CPU s', (r) => fmt(r.cpuSeconds, 1)],
  ['CPU µs/rec', (r) => fmt(r.cpuUsPerRecord?.variant)],
  ['broker µs/rec', (r) => fmt(r.cpuUsPerRecord?.broker)],
  ['machine µs/rec', (r) => fmt(r.cpuUsPerRecord?.machine)],
  ['peak RSS MB', (r) => fmt(r.peakRssMb)],
  ['PG xacts', (r) => fmt(r.pgTransactions)],
  ['Kafka markers', (r) => fmt(r.kafkaMarkers)],
];

function rows(publishers, results) {
  return [...publishers, ...results].map((r) => COLUMNS.map(([, get]) => get(r)));
}

function table(publishers, results) {
  const body = rows(publishers, results);
  const widths = COLUMNS.map(([name], i) => Math.max(name.length, ...body.map((r) => r[i].length)));
  const line = (values) => values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [line(COLUMNS.map(([name]) => name)), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/** The issue's targets as measured ratios (undefined when a variant did not run). */
function ratios(results, publishers) {
  const rate = (v) => [...results, ...publishers].find((r) => r.variant === v)?.recordsPerSecond;
  const ratio = (a, b, target) => (rate(a) && rate(b) ? { name: `${a}/${b}`, value: rate(a) / rate(b), target } : undefined);
  // K/K1 has no target: what key lanes gain for a handler that waits on a lookup.
  // F/E: what 1% of records failing for good costs in throughput.
  return [ratio('E', 'A', 0.5), ratio('F', 'E'), ratio('G', 'E'), ratio('E', 'AT'), ratio('AT', 'A'), ratio('D', 'J', 1), ratio('D', 'B', 3), ratio('D', 'C', 10), ratio('P', 'P0', 0.5), ratio('O', 'P0', 0.5), ratio('K', 'K1'), ratio('DJ', 'D'), ratio('AX', 'A'), ratio('DX', 'D'), ratio('EX', 'E'), ratio('EX', 'AX', 0.5)].filter(Boolean);
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

function ratioLines(list) {
  return list.map((r) => `${r.name} = ${r.value.toFixed(3)}${r.target === undefined ? '' : ` (target ≥ ${r.target}: ${r.value >= r.target ? 'met' : 'missed'})`}`);
}

// --- latency (bench/latency.js) ---

/** The issue's latency targets: p99 end-to-end (read committed) at half the variant's peak rate. */
const LATENCY_TARGETS = { D: 250, E: 100 };

const ms = (v) => fmt(v);
const LATENCY_COLUMNS = [
  ['variant', (r) => r.variant],
  ['rate asked/s', (r) => fmt(r.latency.rate)],
  ['achieved/s', (r) => fmt(r.latency.achievedRate)],
  ['matched', (r) => `${fmt(r.latency.matched)} / ${fmt(r.latency.published)}`],
  ['p50 ms', (r) => ms(r.latency.p50)],
  ['p99 ms', (r) => ms(r.latency.p99)],
  ['max ms', (r) => ms(r.latency.max)],
  ['to produced p50/p99', (r) => `${ms(r.latency.toProduced.p50)} / ${ms(r.latency.toProduced.p99)}`],
  ['to visible p50/p99', (r) => `${ms(r.latency.producedToVisible.p50)} / ${ms(r.latency.producedToVisible.p99)}`],
  ['records/marker', (r) => fmt(recordsPerMarker(r.latency), 1)],
  ['CPU s', (r) => fmt(r.latency.cpuSeconds, 1)],
  ['bench CPU s', (r) => fmt(r.latency.benchCpuSeconds, 1)],
];

/**
 * Output records per transaction marker in the latency phase: a transaction writes one marker on each output
 * partition it wrote to (the library and C: one input partition's unit, whose outputs here go to one partition;
 * J: one poll over every partition), so this is how many records a commit made visible on a partition at once.
 */
function recordsPerMarker(l) {
  return l.kafkaMarkers ? l.outputsReceived / l.kafkaMarkers : undefined;
}

function latencyRows(results) {
  return results.filter((r) => r.latency).map((r) => LATENCY_COLUMNS.map(([, get]) => get(r)));
}

function latencyTable(results) {
  const body = latencyRows(results);
  const widths = LATENCY_COLUMNS.map(([name], i) => Math.max(name.length, ...body.map((r) => r[i].length)));
  const line = (values) => values.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [line(LATENCY_COLUMNS.map(([name]) => name)), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/** One line for the log as a phase ends. */
function latencyLine(r) {
  const l = r.latency;
  return `latency p50 ${ms(l.p50)} ms, p99 ${ms(l.p99)} ms, max ${ms(l.max)} ms at ${fmt(l.achievedRate)} records/s (asked ${fmt(l.rate)}); ${fmt(l.matched)} of ${fmt(l.published)} outputs matched`;
}

/** Each latency target of a variant that had a latency phase: met when every output came and p99 ≤ the target. */
function latencyTargets(results) {
  return Object.entries(LATENCY_TARGETS)
    .map(([variant, target]) => {
      const l = results.find((r) => r.variant === variant)?.latency;
      if (!l) return undefined;
      const complete = l.missing === 0 && l.matched > 0;
      // And no worse than the JVM expert's pipeline (J), when J had a latency phase in the same run.
      const j = results.find((r) => r.variant === 'J')?.latency?.p99;
      return { variant, target, jP99: j, p50: l.p50, p99: l.p99, rate: l.achievedRate, halfPeak: l.halfPeak, complete, met: complete && l.p99 <= target && (j === undefined || l.p99 <= j) };
    })
    .filter(Boolean);
}

/** consumer-app's target at a quarter of its peak (D's second latency phase). */
function quarterLatencyTargets(results) {
  const l = results.find((r) => r.variant === 'D')?.latencyQuarter;
  if (!l) return [];
  const complete = l.missing === 0 && l.matched > 0;
  return [{ variant: 'D', target: LATENCY_TARGETS.D, p50: l.p50, p99: l.p99, rate: l.achievedRate, quarterPeak: true, complete, met: complete && l.p99 <= LATENCY_TARGETS.D }];
}

/** Variant O's target: p99 from a writer's COMMIT to the event visible read-committed, at 1,000 events/s. */
function outboxLatencyTargets(publishers) {
  const l = publishers.find((p) => p.variant === 'O')?.outboxLatency;
  if (!l) return [];
  const complete = l.matched === l.published && l.matched > 0;
  return [{ variant: 'O', target: 100, p50: l.p50, p99: l.p99, rate: l.achievedRate, halfPeak: undefined, fixedRate: true, complete, met: complete && l.p99 <= 100 }];
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

function latencyTargetLines(list) {
  return list.map((t) => {
    if (t.spool) return `P ${t.line} (target: live again within ${t.target} s, nothing lost, in order: ${t.met ? 'met' : 'missed'})`;
    const where = `${fmt(t.rate)} records/s${t.fixedRate ? ' (commit to visible)' : t.quarterPeak ? ', a quarter of its peak' : t.halfPeak ? ', half its peak' : ', --latency-rate (not half its peak)'}`;
    const why = t.complete ? '' : ', outputs missing';
    const j = t.jP99 === undefined ? '' : ` and ≤ J's ${ms(t.jP99)} ms`;
    return `${t.variant} latency p99 = ${ms(t.p99)} ms, p50 ${ms(t.p50)} ms at ${where} (target p99 ≤ ${t.target} ms${j}: ${t.met ? 'met' : 'missed'}${why})`;
  });
}

function latencyMarkdown(results, targets) {
  const body = latencyRows(results);
  if (body.length === 0) return [];
  const l = results.find((r) => r.latency).latency;
  return [
    `## Latency`,
    '',
    `Each variant again, one process, on fresh topics and database; inputs published at a steady rate (half its records/s above unless --latency-rate) for ${l.warmupSeconds} s of warm-up (not counted) and ${l.seconds} s; latency = output received by a read_committed reader − input published. "to produced": input published → the output's own CreateTime (the variant sent it); "to visible": that → received (the variant's commits, the transaction marker, the reader's fetch). records/marker: outputs per transaction marker, i.e. made visible on an output partition by one commit. CPU s: the variant's processes and the bench process itself (publisher and reader) over the phase.`,
    '',
    `| ${LATENCY_COLUMNS.map(([name]) => name).join(' | ')} |`,
    `|${LATENCY_COLUMNS.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`,
    ...body.map((r) => `| ${r.join(' | ')} |`),
    '',
    ...(targets.length
      ? ['| target | measured | |', '|---|---|---|', ...targets.filter((t) => !t.spool).map((t) => `| p99 of ${t.variant} ≤ ${t.target} ms${t.jP99 === undefined ? '' : ` and ≤ J's ${ms(t.jP99)} ms`} ${t.fixedRate ? ', commit to visible at 1,000 records/s' : t.quarterPeak ? ' at a quarter of its peak' : ' at half its peak'} | p99 ${ms(t.p99)} ms, p50 ${ms(t.p50)} ms at ${fmt(t.rate)} records/s${t.halfPeak || t.fixedRate || t.quarterPeak ? '' : ' (--latency-rate)'}${t.complete ? '' : ', outputs missing'} | ${t.met ? 'met' : 'missed'} |`), '']
      : []),
  ];
}

function markdown(run, publishers, results, list, targets = []) {
  const body = rows(publishers, results);
  const labels = [...publishers, ...results].map((r) => `- **${r.variant}**: ${r.label.replace(/^\w+\. /, '')}`);
  return [
    `# Bench run ${run.id}`,
    '',
    `${run.date}: ${run.count} payments, ${run.partitions} partitions; Node ${run.node}, Kafka ${run.kafka} (one broker), PostgreSQL ${run.postgres}; ${run.cpus} CPUs (${run.cpuModel}).`,
    '',
    `| ${COLUMNS.map(([name]) => name).join(' | ')} |`,
    `|${COLUMNS.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`,
    ...body.map((r) => `| ${r.join(' | ')} |`),
    '',
    ...labels,
    '',
    ...ratioLines(list).map((l) => `- ${l}`),
    ...handlerCallsLines(results).map((l) => `- ${l}`),
    ...formatLines(results).map((l) => `- ${l}`),
    ...dataLayerLines(results).map((l) => `- ${l}`),
    '',
    ...latencyMarkdown(results, targets),
    ...targets.filter((t) => t.spool).flatMap((t) => ['## Spool catch-up', '', `${t.line}: target (live again within ${t.target} s of Kafka's return, nothing lost, per-key order) ${t.met ? 'met' : 'missed'}.`, '']),
  ].join('\n');
}

function escape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Horizontal bars, one per variant, records/s on a linear scale. */
function chart(title, entries) {
  const width = 760;
  const bar = 22;
  const pad = { left: 110, right: 90, top: 34, bottom: 16 };
  const height = pad.top + pad.bottom + entries.length * (bar + 8);
  const max = Math.max(1, ...entries.map((e) => e.recordsPerSecond ?? 0));
  const w = (v) => ((v ?? 0) / max) * (width - pad.left - pad.right);
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
        `<text x="${pad.left + w(e.recordsPerSecond) + 6}" y="${y + bar / 2 + 4}">${fmt(e.recordsPerSecond)}</text>`,
      ].join('');
    }),
    '</svg>',
  ];
  return parts.join('\n');
}

/** Per variant with a latency phase: a bar to p99, p50 marked on it, the target (if any) as a red tick. */
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

module.exports = { table, markdown, ratios, ratioLines, handlerCallsLines, chart, latencyTable, latencyLine, latencyTargets, quarterLatencyTargets, outboxLatencyTargets, spoolCatchUpTargets, spoolCatchUpLine, latencyTargetLines, latencyChart, formatLines, dataLayerLines };
