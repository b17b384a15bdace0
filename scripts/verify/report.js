'use strict';
/** The verifier's outputs: a terminal table, Markdown, and an SVG chart of lag over time with the faults marked. */

const COLUMNS = [
  ['scenario', (r) => (r.driver ? `${r.scenario} (${r.driver})` : r.scenario)],
  ['result', (r) => (r.error ? 'ERROR' : r.check.pass ? 'pass' : 'FAIL')],
  ['in', (r) => r.check?.recordsIn],
  ['distinct', (r) => r.check?.distinct],
  ['applied', (r) => r.check?.applied],
  ['lost', (r) => r.check?.lost],
  ['dup effects', (r) => r.check?.duplicateEffects],
  ['dup outputs', (r) => r.check?.duplicateOutputs],
  ['order viol.', (r) => r.check?.orderViolations],
  ['aborted reads', (r) => r.check?.abortedReads],
  ['dead letters', (r) => r.check && `${r.check.deadLetters.found}/${r.check.deadLetters.expected}`],
  ['parked', (r) => r.check && `${r.check.parkedKeys.found}/${r.check.parkedKeys.expected}`],
  ['faults', (r) => r.faults?.length],
  ['caught up', (r) => (r.caughtUpMs === undefined ? '-' : `${(r.caughtUpMs / 1000).toFixed(1)} s`)],
];

function cells(results) {
  return results.map((r) => COLUMNS.map(([, get]) => {
    const v = get(r);
    return v === undefined || v === null ? '-' : String(v);
  }));
}

function table(results) {
  const rows = cells(results);
  const widths = COLUMNS.map(([name], i) => Math.max(name.length, ...rows.map((r) => r[i].length)));
  const line = (values) => values.map((v, i) => v.padEnd(widths[i])).join('  ');
  return [line(COLUMNS.map(([name]) => name)), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function markdown(run, results) {
  const rows = cells(results);
  const lines = [
    `# Verification run ${run.id}`,
    '',
    `${run.date}, profile \`${run.profile}\`, seed ${run.seed}, consumer-app's data layer ${run.dataLayer ?? 'typeorm'}; Kafka ${run.kafka}, ${run.brokers}; Node ${process.version}; PostgreSQL ${run.postgres}.`,
    '',
    `| ${COLUMNS.map(([name]) => name).join(' | ')} |`,
    `|${COLUMNS.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
  ];
  for (const r of results) {
    lines.push(`## ${r.scenario}`, '', r.description, '');
    if (r.error) lines.push(`Error: ${r.error}`, '');
    if (r.check?.problems.length) lines.push(...r.check.problems.map((p) => `- ${p}`), '');
    const own = r.check?.[r.scenario];
    if (own?.hostile) {
      // The formats scenario's own check: each hostile record's dead letter, and the Nest service's payments.
      lines.push('| hostile record | expected reason | dead letter |', '|---|---|---|', ...own.hostile.map((h) => `| ${h.kind} | ${h.expected} | ${h.found} |`), '');
      lines.push(`Payments written by the Nest service (no message id, found by paymentId): ${own.nestAcknowledged} acknowledged, ${own.nestApplied} in the ledger.`, '');
    } else if (own) {
      // A scenario's own check (transient-failures: the welcome emails and their retry topics).
      lines.push(`Welcome emails: ${own.requested} requested by ${own.signups} sign-ups, ${own.sent} sent, ${own.deadLettered} dead-lettered after the last tier, ${own.retried} retried through ${own.tierRecords} retry-topic records; ${own.lost} lost, ${own.duplicated} sent twice, ${own.unaccounted} retry-topic records unaccounted for.`, '');
      if (own.gatewayCalls !== undefined) {
        lines.push(`Gateway calls (the handler's calls outside the database, as the gateway counted them): ${own.gatewayCalls} in all; ${own.extraCallsPerThousand.toFixed(1)} per 1,000 emails past the first by emails never failed (a unit run again, a SIGKILL); ${own.callsPerFailingEmail.toFixed(2)} per email that failed at least once (its in-place attempts on each stage).`, '');
      }
    }
    lines.push(`Faults: ${r.faults.map((f) => `${(f.t / 1000).toFixed(1)} s ${f.label}`).join('; ') || 'none'}.`, '');
    if (r.chart) lines.push(`![lag of ${r.scenario}](${r.chart})`, '');
  }
  lines.push(`Repeat: \`${run.repeat}\``, '');
  return lines.join('\n');
}

const escape = (text) => String(text).replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]);

/** Lag (records not yet committed by the group) over time, one line, with a dashed red mark per fault. */
function lagChart(title, samples, faults) {
  const width = 760;
  const height = 260;
  const pad = { left: 60, right: 20, top: 30, bottom: 40 };
  const tMax = Math.max(1000, ...samples.map((s) => s.t), ...faults.map((f) => f.t));
  const lagMax = Math.max(1, ...samples.map((s) => s.lag));
  const x = (t) => pad.left + (t / tMax) * (width - pad.left - pad.right);
  const y = (lag) => height - pad.bottom - (lag / lagMax) * (height - pad.top - pad.bottom);
  const path = samples.map((s, i) => `${i === 0 ? 'M' : 'L'}${x(s.t).toFixed(1)},${y(s.lag).toFixed(1)}`).join(' ');
  const ticks = Array.from({ length: 6 }, (_, i) => (tMax * i) / 5);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${pad.left}" y="18" font-size="13">${escape(title)}: consumer lag (records) over time</text>`,
    `<line x1="${pad.left}" y1="${height - pad.bottom}" x2="${width - pad.right}" y2="${height - pad.bottom}" stroke="#444"/>`,
    `<line x1="${pad.left}" y1="${pad.top}" x2="${pad.left}" y2="${height - pad.bottom}" stroke="#444"/>`,
    `<text x="${pad.left - 6}" y="${y(lagMax) + 4}" text-anchor="end">${lagMax}</text>`,
    `<text x="${pad.left - 6}" y="${y(0) + 4}" text-anchor="end">0</text>`,
    ...ticks.map((t) => `<text x="${x(t)}" y="${height - pad.bottom + 16}" text-anchor="middle">${(t / 1000).toFixed(0)} s</text>`),
    ...faults.map((f, i) => `<line x1="${x(f.t)}" y1="${pad.top}" x2="${x(f.t)}" y2="${height - pad.bottom}" stroke="#c00" stroke-dasharray="4,3"/><text x="${x(f.t) + 3}" y="${pad.top + 10 + (i % 4) * 11}" fill="#c00">${escape(f.label)}</text>`),
    `<path d="${path}" fill="none" stroke="#1f5fbf" stroke-width="1.5"/>`,
    '</svg>',
  ];
  return parts.join('\n');
}

module.exports = { table, markdown, lagChart };
