import { join } from 'path';
import { Client } from 'pg';
import { RETRY_HEADERS, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { REPO_ROOT } from './support/environment';
import { quietAfter, readTopic } from './support/kafka';
import { sendRaw } from './support/library';
import { waitUntil } from './support/payments';
import { processSuite } from './support/suite';

/**
 * consumer-app's welcome emails (no per-key order, retry topics) against a mail gateway that is down for every
 * second user: SIGKILL between a move to a retry topic and its Kafka commit, and SIGKILL while records wait on
 * the tiers. After the outage each email is sent exactly once, none is dead-lettered, and every record written
 * to a tier is accounted for. (A record that keeps failing to the last tier: library.retry-topics, and verify's
 * transient-failures with a SIGKILL.)
 */
describe('consumer-app: welcome emails through retry topics, killed on the way', () => {
  const { processes, kafka: client } = processSuite();
  const schemas = SchemaRegistry.fromDirectory(join(REPO_ROOT, 'schemas'));

  it('sends each email once after the outage, across a SIGKILL after the move’s PostgreSQL commit and one while records wait', async () => {
    const kafka = client();
    const scope = await createConsumerAppScope('retry-kill');
    // Five tiers, 62 s in all: the gateway's outage ends (below) well within them, however slow the restarts.
    const env = { WELCOME_EMAIL_RETRY_DELAYS: '2s,4s,8s,16s,32s' };
    const welcome = scope.topic('notifications.welcome-email');
    const db = new Client({ connectionString: scope.databaseUrl });
    const crashing = await startConsumerApp(processes, scope, { ...env, KAFKA_EO_FAULT: 'after-retry-move-db-commit:1' });
    await db.connect();
    try {
      // Down for every second user until the test ends the outage.
      await db.query(`INSERT INTO demo_mailer_outages (down_until, every_nth_user) VALUES (now() + interval '1 hour', 2)`);
      const users = Array.from({ length: 40 }, (_, i) => i + 1);
      const email = (id: number) => `user-${id}@example.com`;
      await sendRaw(
        kafka,
        scope.topic('users.signed-up'),
        users.map((id) => ({
          key: `user-${id}`,
          value: encodeSingleObject(schemas.current('com.example.UserSignedUp'), { userId: id, userEmail: email(id), timestamp: new Date().toISOString() }),
          headers: { 'message-id': `signup-${id}` },
        })),
      );

      // Killed right after the first unit that moved an email to a tier committed PostgreSQL, before Kafka.
      expect(await crashing.waitForExit(60000)).toBeNull();
      expect(crashing.logs()).toContain('fault injection: SIGKILL at after-retry-move-db-commit #1');

      // Killed again while emails wait on the tiers.
      const second = await startConsumerApp(processes, scope, { ...env, ADMIN_TOKEN: 'retry-topics-operator-token' });
      await waitUntil(async () => (await db.query(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE status = 'retrying'`)).rows[0].n >= 5, 30000, 'emails waiting on the retry topics');
      // The operator's REST API lists them, as `kafka-eo retries list` does.
      const listed = await fetch(`http://127.0.0.1:${consumerAppPort(second)}/kafka-eo/retries?topic=${encodeURIComponent(welcome)}`, { headers: { authorization: 'Bearer retry-topics-operator-token' } });
      expect(listed.status).toBe(200);
      const { items } = (await listed.json()) as { items: Array<{ retryTopic: string; error: string }> };
      expect(items.length).toBeGreaterThanOrEqual(5);
      expect(items.every((i) => i.retryTopic.startsWith(`${welcome}.retry.`))).toBe(true);
      expect(items.some((i) => /mail gateway unavailable/.test(i.error))).toBe(true);
      await second.kill();

      const third = await startConsumerApp(processes, scope, env);
      // Once every email has been tried on the topic (the even users' failed there), the gateway is back.
      await waitUntil(async () => (await db.query(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE scope = $1 AND status <> 'claimed'`, [welcome])).rows[0].n >= users.length, 60000, 'every email tried once');
      await db.query(`UPDATE demo_mailer_outages SET down_until = now()`);
      const expected = users;
      await waitUntil(async () => (await db.query(`SELECT count(DISTINCT user_id)::int AS n FROM welcome_emails_sent`)).rows[0].n >= expected.length, 90000, 'every welcome email sent');

      const { rows } = await db.query(`SELECT user_id, count(*)::int AS n, count(DISTINCT message_id)::int AS ids, min(topic) AS topic FROM welcome_emails_sent GROUP BY user_id ORDER BY user_id`);
      expect(rows.filter((r) => r.n !== 1)).toEqual([]);
      expect(rows.map((r) => r.user_id)).toEqual(expected);
      // The even users' emails waited on a tier (the gateway failed them), the odd ones went straight through.
      expect(rows.filter((r) => r.user_id % 2 === 0).every((r) => r.topic.startsWith(`${welcome}.retry.`))).toBe(true);
      expect(rows.filter((r) => r.user_id % 2 === 1).every((r) => r.topic === welcome)).toBe(true);

      // The gateway took one key per email, and each email's calls came with that one key (ctx.idempotencyKey),
      // whichever tier and whichever process made them.
      const gateway = await db.query(`SELECT user_id, count(*)::int AS keys, count(sent_at)::int AS sent FROM demo_mailer_calls GROUP BY user_id ORDER BY user_id`);
      expect(gateway.rows).toEqual(expected.map((userId) => ({ user_id: userId, keys: 1, sent: 1 })));

      // None dead-lettered: the outage ended within the tiers.
      expect(await readTopic(kafka, `${welcome}.dlq`, { until: quietAfter(0, 2000), pollIdleMs: 250, timeoutMs: 30000 })).toEqual([]);

      // Every record written to a tier is accounted for: its email sent once.
      const sentIds = new Set((await db.query(`SELECT message_id FROM welcome_emails_sent`)).rows.map((r) => r.message_id));
      const first = await readTopic(kafka, `${welcome}.retry.1`, { until: quietAfter(expected.length / 2, 2000), pollIdleMs: 250, timeoutMs: 30000 });
      expect(first.filter((r) => !sentIds.has(r.headers['message-id']))).toEqual([]);
      // One record per email on the first tier: the replay after the first kill re-sent the one its crashed unit recorded, no second.
      expect(new Set(first.map((r) => r.headers['message-id'])).size).toBe(first.length);
      expect(first).toHaveLength(expected.filter((id) => id % 2 === 0).length);
      expect(first.every((r) => r.headers[RETRY_HEADERS.originalTopic] === welcome && r.headers[RETRY_HEADERS.attempt] === '1')).toBe(true);
      expect(third.logs() + second.logs()).toMatch(/[1-9]\d* replayed from the inbox/);
      expect((await db.query(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE status = 'retrying'`)).rows[0].n).toBe(0);
      await third.stop();
    } finally {
      await db.end();
    }
  }, 240000);
});
