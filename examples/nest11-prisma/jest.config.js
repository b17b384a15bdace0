// Jest as a Nest 11 (CommonJS) application runs it, TypeScript through ts-jest (the generated Prisma client under
// src/generated included), with one broker and one database for the run (test/global-setup.js).
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }] },
  globalSetup: '<rootDir>/test/global-setup.js',
  globalTeardown: '<rootDir>/test/global-teardown.js',
  testTimeout: 120000,
};
