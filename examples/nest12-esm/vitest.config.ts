import { defineConfig } from 'vitest/config';

// As `nest new` scaffolds it (Nest 12), with the shared set-up of test/global-setup.js.
export default defineConfig({
  test: {
    globals: true,
    root: './',
    include: ['test/**/*.e2e-spec.ts'],
    globalSetup: ['test/global-setup.js'],
    testTimeout: 120000,
    hookTimeout: 180000,
  },
});
