import { Kafka, logLevel } from 'kafkajs';
import { KafkaJsFixesNotInForceError } from '../errors/kafkajs-fixes-not-in-force.error';
import { createKafkaClient, type KafkaClient } from './client';
import { clusterCorrections } from './cluster';
import { assertKafkaJsFixesInForce, installedKafkaJs, KAFKAJS_FIXES, kafkaJsFixesNotInForce, type KafkaJsFix } from './corrections-in-force';

// Nothing here connects: clients and clusters are built, their connections are opened only when used.
const config = { clientId: 'spec', brokers: ['127.0.0.1:9'], logLevel: logLevel.NOTHING };

describe('the corrections of KafkaJS in force on a client', () => {
  it('lets a client the library built run: every correction is in force on it', async () => {
    const client = createKafkaClient(config);
    for (const fix of KAFKAJS_FIXES) expect([fix.name, await fix.inForce(client)]).toEqual([fix.name, true]);
    expect(await kafkaJsFixesNotInForce(client)).toBeUndefined();
    await expect(assertKafkaJsFixesInForce(client)).resolves.toBeUndefined();
  });

  it("refuses a client of KafkaJS's own, naming every correction and what to do", async () => {
    const err = await kafkaJsFixesNotInForce(new Kafka(config));
    expect(err).toBeInstanceOf(KafkaJsFixesNotInForceError);
    expect(err?.foreignClient).toBe(true);
    expect(err?.missing.map((f) => f.name)).toEqual(['partition-workers', 'aborted-transactions', 'request-queue']);
    expect(err?.message).toContain('the client it was given is not one of them');
    expect(err?.message).toContain('leave KAFKA_CLIENT to the module');
    await expect(assertKafkaJsFixesInForce(new Kafka(config))).rejects.toThrow(KafkaJsFixesNotInForceError);
  });

  it('refuses an installed kafkajs of another version, naming it, its path and what to do', async () => {
    const err = await kafkaJsFixesNotInForce(createKafkaClient(config), { path: '/app/node_modules/kafkajs', version: '2.2.5' });
    expect(err?.message).toContain('from KafkaJS 2.2.4 with corrections written against that version, and runs on no other');
    expect(err?.message).toContain('this application resolves kafkajs 2.2.5 at /app/node_modules/kafkajs');
    expect(err?.message).toContain('pin "kafkajs": "2.2.4"');
  });

  it('names a correction whose check fails on the client, and only that one', async () => {
    const failing: KafkaJsFix = { name: 'request-queue', corrects: 'an idle connection is not polled every millisecond', inForce: async () => false };
    const throwing: KafkaJsFix = { name: 'other', corrects: 'something', inForce: async () => Promise.reject(new Error('moved')) };
    const err = await kafkaJsFixesNotInForce(createKafkaClient(config), installedKafkaJs(), '2.2.4', [KAFKAJS_FIXES[0], failing, throwing]);
    expect(err?.foreignClient).toBe(false);
    expect(err?.missing.map((f) => f.name)).toEqual(['request-queue', 'other']);
    expect(err?.message).toContain("corrections of KafkaJS are not in force on the Kafka client it built: request-queue (an idle connection is not polled every millisecond); other (something)");
  });

  it("sees partition-workers missing on a client whose consumers run KafkaJS's own consumer group", async () => {
    // A client built as the library's is, but on KafkaJS's createConsumer and ConsumerGroup.
    /* eslint-disable @typescript-eslint/no-require-imports */
    const Client = (require('./vendor/client.cjs') as (parts: object) => new (config: object) => KafkaClient)({ createConsumer: require('kafkajs/src/consumer'), correctCluster: (c: object) => c });
    /* eslint-enable @typescript-eslint/no-require-imports */
    const uncorrected = new Client(config);
    expect(await KAFKAJS_FIXES[0].inForce(uncorrected)).toBe(false);
    expect(await KAFKAJS_FIXES[0].inForce(createKafkaClient(config))).toBe(true);
  });

  it("sees no correction on a cluster of KafkaJS's own client", async () => {
    const stock = new Kafka(config) as unknown as Record<symbol, (args: object) => object>;
    const create = Object.getOwnPropertySymbols(stock).find((s) => s.description === 'private:Kafka:createCluster')!;
    expect(await clusterCorrections(stock[create]({}))).toEqual({ requestQueue: false, abortedTransactions: false });
    expect(await clusterCorrections(createKafkaClient(config).createCluster())).toEqual({ requestQueue: true, abortedTransactions: true });
  });
});
