import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// `make screenshots`: the README's pictures of the product, taken from a
// fresh server like the browser tests; never part of `make test`.
export default defineConfig({
  ...base,
  testDir: './docs',
  outputDir: './test-results/docs',
  projects: [{ name: 'docs', use: { javaScriptEnabled: true } }],
});
