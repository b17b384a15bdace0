import { CreateKafkaEoInbox1764400000000 } from './1764400000000-create-kafka-eo-inbox';
import { InboxMessageDigests1764400200000 } from './1764400200000-inbox-message-digests';
import { InboxTakeovers1764400300000 } from './1764400300000-inbox-takeovers';
import { ParkedKeys1764400400000 } from './1764400400000-parked-keys';
import { OneOpenOperation1764400500000 } from './1764400500000-one-open-operation';
import { Outbox1764400600000 } from './1764400600000-outbox';
import { UnitOutputs1764400700000 } from './1764400700000-unit-outputs';
import { CoordinateIdentities1764400800000 } from './1764400800000-coordinate-identities';
import { OperatorQueries1764400900000 } from './1764400900000-operator-queries';
import { AuditDeclaredActor1764401000000 } from './1764401000000-audit-declared-actor';
import { OperatorPaging1764401100000 } from './1764401100000-operator-paging';
import { CommittedOutputs1764401200000 } from './1764401200000-committed-outputs';
import { InstanceReports1764401300000 } from './1764401300000-instance-reports';
import { BulkOperations1764401400000 } from './1764401400000-bulk-operations';

/**
 * The library's migrations, in order. The module applies them at boot; with `inbox.runMigrations: false`, add
 * them to your DataSource's `migrations` instead.
 */
export const KAFKA_EXACTLY_ONCE_MIGRATIONS = [CreateKafkaEoInbox1764400000000, InboxMessageDigests1764400200000, InboxTakeovers1764400300000, ParkedKeys1764400400000, OneOpenOperation1764400500000, Outbox1764400600000, UnitOutputs1764400700000, CoordinateIdentities1764400800000, OperatorQueries1764400900000, AuditDeclaredActor1764401000000, OperatorPaging1764401100000, CommittedOutputs1764401200000, InstanceReports1764401300000, BulkOperations1764401400000];

export { CreateKafkaEoInbox1764400000000, InboxMessageDigests1764400200000, InboxTakeovers1764400300000, ParkedKeys1764400400000, OneOpenOperation1764400500000, Outbox1764400600000, UnitOutputs1764400700000, CoordinateIdentities1764400800000, OperatorQueries1764400900000, AuditDeclaredActor1764401000000, OperatorPaging1764401100000, CommittedOutputs1764401200000, InstanceReports1764401300000, BulkOperations1764401400000 };
