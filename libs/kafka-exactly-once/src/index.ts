// The public API of kafka-exactly-once. Everything a user imports is exported here.
export {};
