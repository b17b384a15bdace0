'use strict';
/**
 * The verifier's checker: pure functions over a history read independently of the library under test (the
 * input topic, the database, read-committed reads of the output topics by KafkaJS and by the Java client).
 * It computes what the state must be (an in-order fold of the distinct payments of the input topic, docs/demo.md)
 * and reports every difference. `selfTest()` plants each kind of anomaly and checks that it is reported.
 */

/**
 * @typedef {{ partition: number, offset: string, messageId: string|null, payment: {paymentId: string, accountId: string, amountCents: bigint}|null }} Input
 * @typedef {{ partition: number, offset: string, paymentId: string, accountId: string, status: string, balanceAfter: bigint, causationId?: string }} Output
 * @typedef {{
 *   inputs: Input[],
 *   planted: Map<string, string>,
 *   released?: Set<string>,
 *   ledger: Array<{ paymentId: string, accountId: string, status: string, balanceAfter: bigint }>,
 *   accounts: Array<{ accountId: string, balance: bigint }>,
 *   outputs: { kafkajs: Output[], java: Output[] },
 *   deadLetters: Array<{ messageId: string, reason: string }>,
 *   parkedKeys: string[],
 *   expectedParkedKeys: string[],
 *   acknowledged: string[],
 * }} History
 */

/** The expected outcome of every distinct payment, in partition order (each account lives on one partition). */
function fold(inputs, planted) {
  const byPartition = [...inputs].sort((a, b) => a.partition - b.partition || (BigInt(a.offset) < BigInt(b.offset) ? -1 : 1));
  const seenMessages = new Set();
  const seenPayments = new Set();
  const balances = new Map();
  const outcomes = new Map();
  const order = new Map();
  let distinct = 0;
  for (const input of byPartition) {
    if (input.messageId !== null && seenMessages.has(input.messageId)) continue; // duplicate publish
    if (input.messageId !== null) seenMessages.add(input.messageId);
    if (input.messageId !== null && planted.has(input.messageId)) continue; // hostile on purpose: a dead letter
    const p = input.payment;
    if (!p || seenPayments.has(p.paymentId)) continue; // the same payment under another id is a no-op
    seenPayments.add(p.paymentId);
    distinct++;
    const balance = balances.get(p.accountId) ?? 0n;
    const accepted = balance + p.amountCents >= 0n;
    const after = accepted ? balance + p.amountCents : balance;
    balances.set(p.accountId, after);
    outcomes.set(p.paymentId, { accountId: p.accountId, status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS', balanceAfter: after });
    order.set(p.accountId, [...(order.get(p.accountId) ?? []), p.paymentId]);
  }
  return { distinct, balances, outcomes, order };
}

function outputFindings(outputs, expected) {
  const count = new Map();
  for (const o of outputs) count.set(o.paymentId, (count.get(o.paymentId) ?? 0) + 1);
  const duplicateOutputs = [...count.values()].filter((n) => n > 1).reduce((a, n) => a + n - 1, 0);
  const duplicated = [...count].filter(([, n]) => n > 1).slice(0, 3).map(([id]) => `${id} at ${outputs.filter((o) => o.paymentId === id).map((o) => `${o.partition}/${o.offset}`).join(' and ')}`);
  const missingOutputs = [...expected.outcomes.keys()].filter((id) => !count.has(id)).length;
  const unexpectedOutputs = [...count.keys()].filter((id) => !expected.outcomes.has(id)).length;
  const wrongOutputs = outputs.filter((o) => {
    const want = expected.outcomes.get(o.paymentId);
    return want && (want.status !== o.status || want.balanceAfter !== o.balanceAfter);
  }).length;
  // Order per key: the account's outputs (first of each payment) in the fold's order.
  const got = new Map();
  for (const o of [...outputs].sort((a, b) => a.partition - b.partition || (BigInt(a.offset) < BigInt(b.offset) ? -1 : 1))) {
    const list = got.get(o.accountId) ?? [];
    if (!list.includes(o.paymentId)) list.push(o.paymentId);
    got.set(o.accountId, list);
  }
  let orderViolations = 0;
  const keysOutOfOrder = [];
  for (const [account, ids] of expected.order) {
    const seen = (got.get(account) ?? []).filter((id) => expected.outcomes.has(id));
    const want = ids.filter((id) => seen.includes(id));
    let bad = 0;
    want.forEach((id, i) => {
      if (seen[i] !== id) bad++;
    });
    if (bad > 0) keysOutOfOrder.push(account);
    orderViolations += bad;
  }
  return { outputs: outputs.length, duplicated, duplicateOutputs, missingOutputs, unexpectedOutputs, wrongOutputs, orderViolations, keysOutOfOrder: keysOutOfOrder.slice(0, 10) };
}

/** Checks a history; `pass` only if nothing was lost, duplicated, reordered or read from an aborted transaction. */
function check(history) {
  const expected = fold(history.inputs, history.planted);
  const ledger = new Map(history.ledger.map((r) => [r.paymentId, r]));
  const lost = [...expected.outcomes.keys()].filter((id) => !ledger.has(id));
  const extraEffects = history.ledger.filter((r) => !expected.outcomes.has(r.paymentId)).length;
  const wrongOutcomes = history.ledger.filter((r) => {
    const want = expected.outcomes.get(r.paymentId);
    return want && (want.status !== r.status || want.balanceAfter !== r.balanceAfter);
  }).length;
  const balances = new Map(history.accounts.map((a) => [a.accountId, a.balance]));
  const wrongBalances = [...expected.balances].filter(([account, balance]) => balances.get(account) !== balance).length;
  const kafkajs = outputFindings(history.outputs.kafkajs, expected);
  const java = outputFindings(history.outputs.java, expected);
  // What one read-committed reader returns and the other does not: a record of an aborted transaction (or a
  // committed one hidden) in one client.
  const at = (o) => `${o.partition}/${o.offset}`;
  const javaAt = new Set(history.outputs.java.map(at));
  const kafkajsAt = new Set(history.outputs.kafkajs.map(at));
  const abortedReads = history.outputs.kafkajs.filter((o) => !javaAt.has(at(o))).length + history.outputs.java.filter((o) => !kafkajsAt.has(at(o))).length;

  const letters = new Map();
  for (const d of history.deadLetters) letters.set(d.messageId, [...(letters.get(d.messageId) ?? []), d.reason]);
  const missingDeadLetters = [...history.planted].filter(([id]) => !letters.has(id)).map(([id]) => id);
  const wrongReasons = [...history.planted].filter(([id, reason]) => letters.has(id) && reason !== '*' && !letters.get(id).includes(reason)).map(([id]) => id);
  const duplicateDeadLetters = [...letters.values()].filter((rs) => rs.length > 1).length;
  const released = history.released ?? new Set();
  const unexpectedDeadLetters = [...letters.keys()].filter((id) => !history.planted.has(id) && !released.has(id)).length;
  const missingReleased = [...released].filter((id) => !letters.has(id)).length;
  const parkedUnexpected = history.parkedKeys.filter((k) => !history.expectedParkedKeys.includes(k));
  const parkedMissing = history.expectedParkedKeys.filter((k) => !history.parkedKeys.includes(k));
  // An acknowledged publish is named by its message id, or, by a producer that writes none (Nest's client), by its paymentId.
  const published = new Set(history.inputs.flatMap((i) => [i.messageId, i.payment?.paymentId]));
  const acknowledgedLost = history.acknowledged.filter((id) => !published.has(id));

  const result = {
    recordsIn: history.inputs.length,
    distinct: expected.distinct,
    applied: history.ledger.length - extraEffects,
    lost: lost.length,
    duplicateEffects: wrongOutcomes + wrongBalances + extraEffects,
    wrongOutcomes,
    wrongBalances,
    extraEffects,
    duplicateOutputs: Math.max(kafkajs.duplicateOutputs, java.duplicateOutputs),
    missingOutputs: Math.max(kafkajs.missingOutputs, java.missingOutputs),
    wrongOutputs: Math.max(kafkajs.wrongOutputs, java.wrongOutputs, kafkajs.unexpectedOutputs, java.unexpectedOutputs),
    orderViolations: Math.max(kafkajs.orderViolations, java.orderViolations),
    keysOutOfOrder: kafkajs.keysOutOfOrder.length ? kafkajs.keysOutOfOrder : java.keysOutOfOrder,
    abortedReads,
    deadLetters: { expected: history.planted.size + released.size, found: letters.size, missing: missingDeadLetters.length + missingReleased, wrongReason: wrongReasons.length, duplicated: duplicateDeadLetters, unexpected: unexpectedDeadLetters },
    parkedKeys: { expected: history.expectedParkedKeys.length, found: history.parkedKeys.length, unexpected: parkedUnexpected, missing: parkedMissing },
    acknowledged: history.acknowledged.length,
    acknowledgedLost: acknowledgedLost.length,
    outputsRead: { kafkajs: kafkajs.outputs, java: java.outputs },
  };
  const problems = [];
  if (result.lost) problems.push(`${result.lost} payments lost (e.g. ${lost.slice(0, 3).join(', ')})`);
  if (result.duplicateEffects) problems.push(`${result.duplicateEffects} effects differ from the in-order fold (${wrongOutcomes} outcomes, ${wrongBalances} balances, ${extraEffects} extra)`);
  if (result.duplicateOutputs) problems.push(`${result.duplicateOutputs} duplicate outputs (e.g. ${(kafkajs.duplicated.length ? kafkajs.duplicated : java.duplicated).join('; ')})`);
  if (result.missingOutputs) problems.push(`${result.missingOutputs} missing outputs`);
  if (result.wrongOutputs) problems.push(`${result.wrongOutputs} outputs that differ from the fold or name no input`);
  if (result.orderViolations) problems.push(`${result.orderViolations} order violations (keys ${result.keysOutOfOrder.join(', ')})`);
  if (result.abortedReads) problems.push(`${result.abortedReads} records one read-committed client returns and the other does not (aborted reads)`);
  if (missingDeadLetters.length || missingReleased || wrongReasons.length || duplicateDeadLetters || unexpectedDeadLetters) {
    problems.push(`dead letters: ${missingDeadLetters.length + missingReleased} missing, ${wrongReasons.length} with another reason, ${duplicateDeadLetters} duplicated, ${unexpectedDeadLetters} unexpected`);
  }
  if (parkedUnexpected.length || parkedMissing.length) problems.push(`parked keys: unexpected ${parkedUnexpected.join(', ') || '-'}, missing ${parkedMissing.join(', ') || '-'}`);
  if (acknowledgedLost.length) problems.push(`${acknowledgedLost.length} publishes acknowledged to the caller never reached the topic`);
  return { ...result, pass: problems.length === 0, problems };
}

/**
 * The transient-failures scenario's own check, over welcome emails read independently of the library: each
 * email requested (a record of the welcome topic, by its message id) is sent exactly once, or, for an address
 * that always bounces, dead-lettered once after the last tier with the history of every stage; nothing else is
 * sent or dead-lettered, and every record the retry topics hold is one of the requested emails.
 *
 * @param {{
 *   requested: Array<{ messageId: string, userId: number, email: string }>,
 *   sent: Array<{ messageId: string, userId: number }>,
 *   deadLetters: Array<{ messageId: string, stages: number }>,
 *   tierRecords: Array<{ topic: string, messageId: string }>,
 *   gatewayCalls?: Array<{ userId: number, calls: number, failed: number }>,
 *   signups: number,
 *   tiers: number,
 *   bounces: (email: string) => boolean,
 * }} history
 */
function checkRetries(history) {
  const requested = new Map(history.requested.map((r) => [r.messageId, r]));
  const sends = new Map();
  for (const s of history.sent) sends.set(s.messageId, (sends.get(s.messageId) ?? 0) + 1);
  const letters = new Map();
  for (const d of history.deadLetters) letters.set(d.messageId, [...(letters.get(d.messageId) ?? []), d]);
  const bouncing = [...requested.values()].filter((r) => history.bounces(r.email));
  const lost = [...requested.values()].filter((r) => !history.bounces(r.email) && !sends.has(r.messageId));
  const duplicated = [...sends].filter(([, n]) => n > 1).map(([id]) => id);
  const unexpectedSends = [...sends.keys()].filter((id) => !requested.has(id) || history.bounces(requested.get(id).email));
  const missingLetters = bouncing.filter((r) => (letters.get(r.messageId)?.length ?? 0) !== 1);
  const shortHistory = bouncing.filter((r) => letters.get(r.messageId)?.some((d) => d.stages !== history.tiers + 1));
  const unexpectedLetters = [...letters.keys()].filter((id) => !requested.has(id) || !history.bounces(requested.get(id).email));
  const unaccounted = history.tierRecords.filter((t) => !requested.has(t.messageId));
  const result = {
    signups: history.signups,
    requested: requested.size,
    sent: sends.size,
    deadLettered: letters.size,
    retried: new Set(history.tierRecords.map((t) => t.messageId)).size,
    tierRecords: history.tierRecords.length,
    lost: lost.length,
    duplicated: duplicated.length,
    unexpectedSends: unexpectedSends.length,
    missingDeadLetters: missingLetters.length,
    unexpectedDeadLetters: unexpectedLetters.length,
    unaccounted: unaccounted.length,
    ...gatewayFigures(history.gatewayCalls),
  };
  const problems = [];
  if (requested.size !== history.signups) problems.push(`${history.signups} sign-ups asked for ${requested.size} welcome emails`);
  if (lost.length) problems.push(`${lost.length} welcome emails never sent (e.g. ${lost.slice(0, 3).map((r) => r.messageId).join(', ')})`);
  if (duplicated.length) problems.push(`${duplicated.length} welcome emails sent more than once (e.g. ${duplicated.slice(0, 3).join(', ')})`);
  if (unexpectedSends.length) problems.push(`${unexpectedSends.length} sends of no requested email or of a bouncing one`);
  if (missingLetters.length || shortHistory.length) problems.push(`bouncing emails: ${missingLetters.length} not dead-lettered exactly once, ${shortHistory.length} without the history of all ${history.tiers + 1} stages`);
  if (unexpectedLetters.length) problems.push(`${unexpectedLetters.length} emails dead-lettered that the gateway would have taken after its outage`);
  if (unaccounted.length) problems.push(`${unaccounted.length} retry-topic records of no requested email`);
  return { ...result, pass: problems.length === 0, problems };
}

/**
 * What the gateway's record of calls says about the handler's calls outside the database (measured, not
 * checked: a call repeated after a crash is allowed, and deduplicated by the gateway): the calls past the first
 * of emails whose every call succeeded, per 1,000 emails, and the calls per email that failed at least once.
 */
function gatewayFigures(calls) {
  if (!calls) return {};
  const clean = calls.filter((c) => c.failed === 0);
  const failing = calls.filter((c) => c.failed > 0);
  const extra = clean.reduce((n, c) => n + c.calls - 1, 0);
  return {
    gatewayCalls: calls.reduce((n, c) => n + c.calls, 0),
    extraCallsPerThousand: calls.length ? (extra * 1000) / calls.length : 0,
    callsPerFailingEmail: failing.length ? failing.reduce((n, c) => n + c.calls, 0) / failing.length : 0,
  };
}

/** A clean synthetic history of welcome emails (one retried, one bouncing), for the self-test. */
function syntheticRetries() {
  return {
    requested: [
      { messageId: 'w-1', userId: 1, email: 'a@example.com' },
      { messageId: 'w-2', userId: 2, email: 'b@example.com' },
      { messageId: 'w-3', userId: 3, email: 'c@bounce.invalid' },
    ],
    sent: [{ messageId: 'w-1', userId: 1 }, { messageId: 'w-2', userId: 2 }],
    deadLetters: [{ messageId: 'w-3', stages: 3 }],
    tierRecords: [{ topic: 't.retry.1', messageId: 'w-2' }, { topic: 't.retry.1', messageId: 'w-3' }, { topic: 't.retry.2', messageId: 'w-3' }],
    signups: 3,
    tiers: 2,
    bounces: (email) => email.endsWith('@bounce.invalid'),
  };
}

/** A clean synthetic history (two accounts, one planted dead letter), for the self-test. */
function syntheticHistory() {
  const pay = (partition, offset, n, accountId, amountCents) => ({ partition, offset: String(offset), messageId: `m-${n}`, payment: { paymentId: `p-${n}`, accountId, amountCents } });
  const inputs = [pay(0, 0, 1, 'a', 100n), pay(0, 1, 2, 'a', -50n), pay(0, 2, 3, 'a', -80n), pay(1, 0, 4, 'b', 10n), pay(1, 1, 5, 'b', 5n), { partition: 1, offset: '2', messageId: 'bad-1', payment: null }, pay(1, 3, 4, 'b', 10n)];
  const expected = fold(inputs, new Map([['bad-1', 'decode-failed']]));
  const ledger = [...expected.outcomes].map(([paymentId, o]) => ({ paymentId, accountId: o.accountId, status: o.status, balanceAfter: o.balanceAfter }));
  const outputs = ledger.map((r, i) => ({ partition: r.accountId === 'a' ? 0 : 1, offset: String(i), paymentId: r.paymentId, accountId: r.accountId, status: r.status, balanceAfter: r.balanceAfter }));
  return {
    inputs,
    planted: new Map([['bad-1', 'decode-failed']]),
    ledger,
    accounts: [...expected.balances].map(([accountId, balance]) => ({ accountId, balance })),
    outputs: { kafkajs: outputs, java: outputs.map((o) => ({ ...o })) },
    deadLetters: [{ messageId: 'bad-1', reason: 'decode-failed' }],
    parkedKeys: [],
    expectedParkedKeys: [],
    acknowledged: ['m-1', 'm-2'],
  };
}

/**
 * Plants each kind of anomaly in a clean history and returns, per kind, whether the checker reported it (and
 * whether the clean history passes). A checker that cannot fail proves nothing.
 */
function selfTest() {
  const clean = check(syntheticHistory());
  const plants = {
    'lost payment': (h) => (h.ledger = h.ledger.filter((r) => r.paymentId !== 'p-2')),
    'duplicate effect': (h) => (h.accounts = h.accounts.map((a) => (a.accountId === 'b' ? { ...a, balance: a.balance + 10n } : a))),
    'duplicate output': (h) => h.outputs.kafkajs.push({ ...h.outputs.kafkajs[0], offset: '99' }),
    'reordered outputs': (h) => {
      const [first, second] = h.outputs.java;
      h.outputs.java[0] = { ...second, offset: first.offset };
      h.outputs.java[1] = { ...first, offset: second.offset };
    },
    'reordered effects': (h) => {
      const r = h.ledger.find((x) => x.paymentId === 'p-3');
      r.status = 'ACCEPTED';
    },
    'aborted read': (h) => h.outputs.kafkajs.push({ partition: 7, offset: '0', paymentId: 'p-1', accountId: 'a', status: 'ACCEPTED', balanceAfter: 100n }),
    'missing dead letter': (h) => (h.deadLetters = []),
    'unexpected parked key': (h) => (h.parkedKeys = ['a']),
    'acknowledged publish lost': (h) => h.acknowledged.push('m-404'),
  };
  const results = { 'clean history passes': clean.pass };
  for (const [name, plant] of Object.entries(plants)) {
    const history = syntheticHistory();
    plant(history);
    results[`${name} reported`] = !check(history).pass;
  }
  results['clean retries pass'] = checkRetries(syntheticRetries()).pass;
  const retryPlants = {
    'email sent twice': (h) => h.sent.push({ messageId: 'w-2', userId: 2 }),
    'retried email lost': (h) => (h.sent = h.sent.filter((x) => x.messageId !== 'w-2')),
    'bounce not dead-lettered': (h) => (h.deadLetters = []),
    'tier record unaccounted': (h) => h.tierRecords.push({ topic: 't.retry.1', messageId: 'w-9' }),
  };
  for (const [name, plant] of Object.entries(retryPlants)) {
    const history = syntheticRetries();
    plant(history);
    results[`${name} reported`] = !checkRetries(history).pass;
  }
  return results;
}

module.exports = { check, checkRetries, fold, selfTest };
