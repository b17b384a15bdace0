export { KafkaExactlyOnceMetrics } from './kafka-exactly-once.metrics';
export { KafkaExactlyOnceMetricsController } from './kafka-exactly-once-metrics.controller';
