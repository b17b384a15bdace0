#!/usr/bin/env node
'use strict';
/**
 * Summarises a V8 CPU profile (node --cpu-prof): self time by function and by package, and the idle share.
 *   node bench/profile-summary.js <file.cpuprofile> [--top 25]
 */
const { readFileSync } = require('fs');

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node bench/profile-summary.js <file.cpuprofile> [--top 25]\n');
  process.exit(2);
}
const top = Number(rest[rest.indexOf('--top') + 1]) || 25;
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
// timeDeltas[i] is the time before samples[i]: attribute each delta to its sample's node.
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

const fn = new Map();
const pkg = new Map();
for (const [id, us] of self) {
  const { callFrame } = byId.get(id);
  const where = callFrame.url.replace(/^file:\/\//, '');
  const name = `${callFrame.functionName || '(anonymous)'} ${where ? `${where.split('/').slice(-2).join('/')}:${callFrame.lineNumber + 1}` : ''}`.trim();
  fn.set(name, (fn.get(name) ?? 0) + us);
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(where);
  const group = m ? m[1] : where.includes('/libs/kafka-exactly-once/') ? 'kafka-exactly-once' : where.startsWith('node:') ? 'node internals' : where ? 'app' : callFrame.functionName || '(native)';
  pkg.set(group, (pkg.get(group) ?? 0) + us);
}
const pct = (us) => `${((us / total) * 100).toFixed(1).padStart(5)}%`;
const print = (title, map, n) => {
  process.stdout.write(`${title}\n`);
  for (const [name, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, n)) process.stdout.write(`  ${pct(us)}  ${name}\n`);
};
process.stdout.write(`${file}: ${(total / 1e6).toFixed(1)} s sampled\n`);
print('by package (self time):', pkg, 15);
print(`top ${top} functions (self time):`, fn, top);
