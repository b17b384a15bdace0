import { fixKafkaJsAbortedTransactions } from './kafkajs-aborted-transactions.fix';
import { fixKafkaJsPartitionWorkers } from './kafkajs-partition-workers.fix';
import { fixKafkaJsRequestQueue } from './kafkajs-request-queue.fix';

/**
 * The library's corrections of KafkaJS 2.2.4, applied once per process when it creates its clients (to the KafkaJS
 * the application resolves, kafkajs being a peer dependency): the request queue that polls idle connections, and
 * the read-committed filter that lets records of aborted transactions through, and the fetch that sleeps while
 * every partition is paused. The producer's send path is
 * replaced per producer instead (producer/checked-producer.ts). A client built from another copy of KafkaJS gets
 * none of them: the module checks them on its client's own copy at boot (kafkajs-fixes-in-force.ts).
 */
export function fixKafkaJs(): void {
  fixKafkaJsRequestQueue();
  fixKafkaJsAbortedTransactions();
  fixKafkaJsPartitionWorkers();
}
