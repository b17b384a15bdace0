/**
 * Two projects: `unit` runs the pure-logic specs beside the library code; `integration` runs the suites in
 * test/ against a real Kafka broker and a real PostgreSQL (global set-up starts the local broker if needed
 * and creates a fresh database for the run).
 */
const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
};
const moduleNameMapper = {
  '^kafka-exactly-once$': '<rootDir>/libs/kafka-exactly-once/src',
  '^kafka-exactly-once/(.*)$': '<rootDir>/libs/kafka-exactly-once/src/$1',
};

// Built output (with the packed library's staging folder) and the example applications, which have package.json
// files of their own, are not modules of the repository.
const modulePathIgnorePatterns = ['<rootDir>/dist/', '<rootDir>/examples/'];

module.exports = {
  // Integration suites run real processes against a real broker; unit specs finish in milliseconds anyway.
  testTimeout: 180000,
  slowTestThreshold: 30,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      rootDir: __dirname,
      testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/scripts/**/*.spec.js'],
      transform,
      moduleNameMapper,
      modulePathIgnorePatterns,
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      rootDir: __dirname,
      testMatch: ['<rootDir>/test/**/*.int-spec.ts'],
      transform,
      moduleNameMapper,
      modulePathIgnorePatterns,
      setupFilesAfterEnv: ['<rootDir>/test/setup/earlier-topics.ts'],
      globalSetup: '<rootDir>/test/setup/global-setup.ts',
      globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
    },
  ],
};
