import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * The outputs a record's handling recorded in PostgreSQL (its Kafka transaction did not commit then) are refused
 * by Kafka for good now: a topic's max.message.bytes lowered since, say. The handler does not run again (its
 * effects are committed), so no retry helps: the partition waits at this record, shown in health, until an
 * operator diverts the refused outputs to the dead-letter topic (`kafka-eo outputs divert`, or
 * `POST /kafka-eo/outputs/divert`); then it moves on by itself. docs/operations.md, "Outputs Kafka refuses".
 */
export class RecordedOutputsRefusedError extends KafkaExactlyOnceError {
  readonly retriable = true;

  constructor(
    readonly group: string,
    readonly topic: string,
    readonly partition: number,
    readonly offset: string,
    readonly messageId: string,
    readonly outputTopic: string | undefined,
    readonly refusal: string,
  ) {
    super(
      `the recorded outputs of ${topic}[${partition}]@${offset} (message ${messageId}), handled before, are refused by Kafka for good${outputTopic ? ` on ${outputTopic}` : ''} (${refusal}); the partition waits here. ` +
        `Divert them to the dead-letter topic: kafka-eo outputs divert ${topic} ${partition} ${offset} --group ${group} --output-topic ${outputTopic ?? '<topic>'} --reason "..." (or POST /kafka-eo/outputs/divert); docs/operations.md`,
    );
  }
}
