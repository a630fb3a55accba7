/**
 * Jest runs the TypeScript unit tests in labextension/src/__tests__ (`npm test`).
 * jsdom gives the DOM tests (sortable table, escaping) a document.
 */
module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/labextension/src'],
  testMatch: ['**/__tests__/**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }]
  }
};
