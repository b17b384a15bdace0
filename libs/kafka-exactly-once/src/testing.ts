// kafka-exactly-once/testing: helpers for tests of applications built on the library and of the library itself.
// - For an application's own tests (docs/testing.md): startTestKafka, createTestTopics, createTestDatabase,
//   waitForCommitted, and loadedPackageBuilds (which build of the package a test loaded).
// The rest is for tests of the protocol itself, not part of the public API (its shape may change in any release):
// - The fault switch: a process started with `${FAULT_ENV}=<point>` exits (like `kill -9`) when a unit of work
//   reaches that point of the protocol, to prove what a crash there does.
// - The wire format's codec (Avro single-object encoding), to write raw or deliberately malformed records.
import './package-copies';
export { FAULT_ENV } from './kafka-exactly-once.constants';
export { FAULT_POINTS, UNIT_OF_WORK_FAULT_POINTS, RETRY_FAULT_POINTS, HANGING_FAULT_POINTS, type FaultPoint } from './engine/fault-injector';
export { encodeSingleObject, decodeSingleObject, readFingerprint, validationErrors } from './formats/avro/single-object.codec';
export { rabinFingerprint64 } from './formats/avro/rabin-fingerprint';
export { loadedPackageBuilds, type PackageBuild } from './package-copies';
// Helpers for an application's own tests against a real broker and PostgreSQL (docs/testing.md).
export { startTestKafka, type TestKafka, type TestKafkaOptions } from './testing/test-kafka';
export { createTestDatabase, type TestDatabase } from './testing/test-database';
export { createTestTopics, uniqueTopicName, type TestTopic } from './testing/test-topics';
export { waitForCommitted, type CommittedRecord } from './testing/wait-for-committed';
