import '../package-copies';
export { KafkaExactlyOnceServer, KAFKA_EXACTLY_ONCE_TRANSPORT, type KafkaExactlyOnceEventExtras } from './kafka-exactly-once.server';
export { ClientKafkaExactlyOnce, clientKafkaExactlyOnce, type ClientKafkaExactlyOnceOptions, type KafkaExactlyOnceRecord } from './client-kafka-exactly-once';
export { RequestResponseNotSupportedError } from '../errors/request-response-not-supported.error';
