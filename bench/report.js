'use strict';
/** The bench's outputs: a terminal table, Markdown, the target ratios and an SVG bar chart of records/s. */

const fmt = (v, digits = 0) => (v === undefined || v === null || Number.isNaN(v) ? '-' : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));

const COLUMNS = [
  ['variant', (r) => r.variant],
  ['records', (r) => fmt(r.records)],
  ['records/s', (r) => fmt(r.recordsPerSecond)],
  ['start-up s', (r) => fmt(r.startupSeconds, 1)],
  ['total s', (r) => fmt(r.totalSeconds, 1)],
  ['CPU s', (r) => fmt(r.cpuSeconds, 1)],
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

/** The targets as measured ratios (undefined when a variant did not run). */
function ratios(results, publishers) {
  const rate = (v) => [...results, ...publishers].find((r) => r.variant === v)?.recordsPerSecond;
  const ratio = (a, b, target) => (rate(a) && rate(b) ? { name: `${a}/${b}`, value: rate(a) / rate(b), target } : undefined);
  return [ratio('E', 'A', 0.5), ratio('D', 'C', 10), ratio('P', 'P0', 0.5)].filter(Boolean);
}

function ratioLines(list) {
  return list.map((r) => `${r.name} = ${r.value.toFixed(3)} (target ≥ ${r.target}: ${r.value >= r.target ? 'met' : 'missed'})`);
}

function markdown(run, publishers, results, list) {
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
    '',
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

module.exports = { table, markdown, ratios, ratioLines, chart };
