// kafka-exactly-once/testing: helpers for tests of the library and of applications built on it, not part of
// the public API (their shape may change in any release).
// - The fault switch: a process started with `${FAULT_ENV}=<point>` exits (like `kill -9`) when a unit of work
//   reaches that point of the protocol, to prove what a crash there does.
// - The wire format's codec (Avro single-object encoding), to write raw or deliberately malformed records.
export { FAULT_ENV } from './kafka-exactly-once.constants';
export { FAULT_POINTS, UNIT_OF_WORK_FAULT_POINTS, type FaultPoint } from './engine/fault-injector';
export { encodeSingleObject, decodeSingleObject, readFingerprint, validationErrors } from './serde/single-object.codec';
export { rabinFingerprint64 } from './serde/rabin-fingerprint';
