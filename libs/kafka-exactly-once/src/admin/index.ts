export { KafkaExactlyOnceAdminModule } from './kafka-exactly-once-admin.module';
export type { KafkaExactlyOnceAdminOptions } from './admin.options';
export { OperatorStore, DEAD_LETTER_REASONS } from './operator-store';
export type { ListQuery, Page, DeadLetterSummary, DeadLetterDetail, ParkedKeySummary, ParkedKeyDetail, ParkedRecord, AuditEntry, RetryingRecord } from './operator-store';
export { pgPoolSql, dataSourceSql, type SqlClient } from './sql-client';
