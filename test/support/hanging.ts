import { ConfigResourceTypes } from 'kafkajs';
import type { KafkaClient } from 'kafka-exactly-once/kafkajs';
import type { MarkerAnswer } from 'kafka-exactly-once/client/log-requests';
import { txnMarkersV1 } from 'kafka-exactly-once/kafkajs/log-requests';
import { createCluster, sendProduce, sendRequest } from 'kafka-exactly-once/kafkajs/producer/kafkajs-internals';
import { withAdmin } from './kafka';

const VERIFICATION = 'transaction.partition.verification.enable';

interface RawBroker {
  initProducerId(args: { transactionalId: string; transactionTimeout: number }): Promise<{ producerId: number; producerEpoch: number }>;
  txnOffsetCommit(args: object): Promise<unknown>;
}

/** The hanging transaction being left in this process, if any: the next waits for it. */
let leaving: Promise<unknown> = Promise.resolve();

/**
 * Leaves a real hanging transaction: a producer with `transactionalId` writes the group's offset of
 * `offsets.topic[partition]` and one record on each of `records` in a transaction its coordinator never heard of
 * (no AddOffsetsToTxn, no AddPartitionsToTxn; the offset is left out when `offsets` is), so nothing will ever write its markers: what a broker crash leaves
 * in Kafka 4.4 with KafkaJS's transaction protocol v1 (docs/operations.md §8), made on purpose. Kafka refuses such
 * writes since KIP-890 (`transaction.partition.verification.enable`): the check is turned off on every broker for
 * the moment of the writes (a dynamic broker setting) and on again after, whatever happens.
 */
export function leaveHangingTransaction(
  kafka: KafkaClient,
  transactionalId: string,
  offsets: { groupId: string; topic: string; partition: number; offset: string } | undefined,
  records: Array<{ topic: string; partition: number; key?: string | Buffer; value?: string | Buffer; headers?: Record<string, string | Buffer>; timestamp?: string }>,
): Promise<{ producerId: number; producerEpoch: number }> {
  // One at a time in a process (tests that run side by side): the check is a setting of the whole broker, read and
  // put back by each.
  const turn = leaving.then(() => leave(kafka, transactionalId, offsets, records));
  leaving = turn.catch(() => undefined);
  return turn;
}

async function leave(
  kafka: KafkaClient,
  transactionalId: string,
  offsets: Parameters<typeof leaveHangingTransaction>[2],
  records: Parameters<typeof leaveHangingTransaction>[3],
): Promise<{ producerId: number; producerEpoch: number }> {
  const nodes = await withAdmin(kafka, async (admin) => (await admin.describeCluster()).brokers.map((b) => String(b.nodeId)));
  // Put back as found: the broker's own override if it had one, else the default (true).
  const before = await withAdmin(kafka, async (admin) => {
    const { resources } = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.BROKER, name: nodes[0], configNames: [VERIFICATION] }] });
    return resources[0]?.configEntries.find((e) => e.configName === VERIFICATION)?.configValue === 'false' ? 'false' : 'true';
  });
  const verification = (value: 'true' | 'false') =>
    withAdmin(kafka, (admin) => admin.alterConfigs({ validateOnly: false, resources: nodes.map((name) => ({ type: ConfigResourceTypes.BROKER, name, configEntries: [{ name: VERIFICATION, value }] })) }));
  const cluster = createCluster(kafka);
  await verification('false');
  try {
    await cluster.connect();
    // The setting reaches the request handlers a moment after it is accepted: each write is tried until it goes through.
    const accepted = async <T>(write: () => Promise<T>): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await write();
        } catch (err) {
          if (attempt >= 30) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    };
    // A coordinator still loading (a broker just restarted) is asked again, as each write below is.
    const producer = await accepted(async () => {
      const coordinator = (await cluster.findGroupCoordinator({ groupId: transactionalId, coordinatorType: 1 })) as unknown as RawBroker;
      return coordinator.initProducerId({ transactionalId, transactionTimeout: 60000 });
    });
    const { producerId, producerEpoch } = producer;
    if (offsets) {
      await accepted(async () => {
        const groupCoordinator = (await cluster.findGroupCoordinator({ groupId: offsets.groupId })) as unknown as RawBroker;
        await groupCoordinator.txnOffsetCommit({
          transactionalId,
          groupId: offsets.groupId,
          producerId,
          producerEpoch,
          topics: [{ topic: offsets.topic, partitions: [{ partition: offsets.partition, offset: offsets.offset }] }],
        });
      });
    }
    await cluster.addMultipleTargetTopics(records.map((r) => r.topic));
    for (const { topic, partition, key = 'hanging', value = 'left by a hanging transaction', headers, timestamp } of records) {
      await accepted(async () => {
        const leader = cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)!.leader;
        const answer = await sendProduce(await cluster.findBroker({ nodeId: leader }), {
          acks: -1,
          timeout: 30000,
          transactionalId,
          producerId,
          producerEpoch,
          topicData: [{ topic, partitions: [{ partition, firstSequence: 0, messages: [{ key, value, headers, ...(timestamp ? { timestamp } : {}) }] }] }],
        });
        const code = answer.topics[0].partitions[0].errorCode;
        if (code !== 0) throw new Error(`the hanging transaction's record on ${topic}[${partition}] was refused (error code ${code})`);
      });
    }
    return producer;
  } finally {
    await verification(before);
    await cluster.disconnect();
  }
}

/**
 * Writes the markers of a transaction of `producer` on some of its partitions only (WriteTxnMarkers, as a
 * coordinator does): what a broker crash can leave, a transaction committed on some partitions (its outputs, read
 * committed, visible there) and open for good on the others.
 */
export async function endOn(kafka: KafkaClient, producer: { producerId: number; producerEpoch: number }, commit: boolean, partitions: Array<{ topic: string; partition: number }>): Promise<void> {
  const cluster = createCluster(kafka);
  try {
    await cluster.connect();
    await cluster.addMultipleTargetTopics([...new Set(partitions.map((p) => p.topic))]);
    for (const { topic, partition } of partitions) {
      const leader = cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)!.leader;
      // Coordinator epoch 0: no coordinator has written a marker of this producer there yet.
      const answers = await sendRequest<MarkerAnswer[]>(await cluster.findBroker({ nodeId: leader }), txnMarkersV1(String(producer.producerId), producer.producerEpoch, 0, commit, [{ topic, partitions: [partition] }]));
      const refused = answers.filter((a) => a.errorCode !== 0);
      if (refused.length) throw new Error(`the ${commit ? 'commit' : 'abort'} marker on ${topic}[${partition}] was refused (error code ${refused[0].errorCode})`);
    }
  } finally {
    await cluster.disconnect();
  }
}
