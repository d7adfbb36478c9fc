import { defineConfig } from '@playwright/test';

// Browser tests against a real converge (see e2e/global-setup.ts), driving Debian's Chromium.
export default defineConfig({
  testDir: './e2e',
  outputDir: './test-results/artifacts',
  globalSetup: './e2e/global-setup.ts',
  timeout: 60_000,
  expect: { timeout: 15_000 },
  workers: 1,
  fullyParallel: false,
  reporter: [['list']],
  use: {
    headless: true,
    viewport: { width: 1280, height: 800 },
    launchOptions: { executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium' },
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
  },
});
