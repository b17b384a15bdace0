import type { KafkaConnectionOptions } from '../client/drivers';
import type { CommittedOffsetAnswer, DriverParts, StableOffsetFetcher } from '../client/driver-parts';
import { platformaticAdmin } from './cluster-admin';
import { connectionOptions, platformaticKafka } from './load';
import { PlatformaticLogRequests } from './log-requests';
import { kafkaError, PlatformaticProducerCluster, platformaticProducers } from './producer-parts';

/** Coordinator type of a consumer group in FindCoordinator. */
const GROUP = 0;
/** OffsetFetch answers after which the group's coordinator is looked up again. */
const STALE_COORDINATOR = new Set([15 /* COORDINATOR_NOT_AVAILABLE */, 16 /* NOT_COORDINATOR */]);

/** The `platformatic` driver's parts beside its consumer group: the library's producers, its committed-offset reads, its own requests and its admin. */
export function platformaticParts(connection: KafkaConnectionOptions): DriverParts {
  const options = connectionOptions(connection);
  return {
    producers: platformaticProducers(connection),
    stableOffsets: () => new PlatformaticStableOffsets(new PlatformaticProducerCluster(options, { stopped: () => false })),
    logRequests: () => new PlatformaticLogRequests(options),
    admin: (adminOptions) => platformaticAdmin(connection, adminOptions),
  };
}

interface OffsetFetchAnswer {
  groups: Array<{ errorCode: number; topics: Array<{ name: string; partitions: Array<{ partitionIndex: number; committedOffset: bigint; errorCode: number }> }> }>;
}

/** OffsetFetch v8 with require_stable to the group's coordinator, over the client's connections and protocol function. */
export class PlatformaticStableOffsets implements StableOffsetFetcher {
  constructor(private readonly cluster: PlatformaticProducerCluster) {}

  async fetch(groupId: string, topic: string, partitions: number[]): Promise<{ errorCode: number; answers: CommittedOffsetAnswer[] }> {
    const { offsetFetchV8 } = platformaticKafka();
    await this.cluster.connectOnce();
    const connection = await this.cluster.connectionTo(await this.cluster.coordinator(GROUP, groupId));
    let answer: OffsetFetchAnswer;
    try {
      answer = (await offsetFetchV8.api.async(connection, [{ groupId, memberId: null, memberEpoch: -1, topics: [{ name: topic, partitionIndexes: partitions }] }], true)) as OffsetFetchAnswer;
    } catch (err) {
      // An error code in the answer (UNSTABLE_OFFSET_COMMIT, a coordinator moved) comes with the answer.
      const carried = (err as { response?: OffsetFetchAnswer }).response;
      if (!carried?.groups) throw kafkaError(err);
      answer = carried;
    }
    const group = answer.groups[0];
    const answers = (group?.topics ?? []).filter((t) => t.name === topic).flatMap((t) => t.partitions.map((p) => ({ partition: p.partitionIndex, offset: p.committedOffset, errorCode: p.errorCode })));
    const errorCode = group?.errorCode ?? 0;
    if (STALE_COORDINATOR.has(errorCode) || answers.some((a) => STALE_COORDINATOR.has(a.errorCode))) this.cluster.forgetCoordinator(GROUP, groupId);
    return { errorCode, answers };
  }

  reset(): void {
    // The pool drops a closed connection by itself; the coordinator may have moved.
    this.cluster.forgetCoordinators();
  }

  async disconnect(): Promise<void> {
    await this.cluster.disconnect();
  }
}
