/// <reference types="vitest/config" />
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// `npm run dev` proxies the API to a running converge (CONVERGE_URL, default :8080).
const target = process.env.CONVERGE_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [react()],
  // Absolute asset paths: the SPA is served at `/` and deep links like /resources/list/r/x/y
  // must still find /assets/...
  base: '/',
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 1500 },
  server: { proxy: { '/api': { target, changeOrigin: true } } },
  preview: { proxy: { '/api': { target, changeOrigin: true } } },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.{ts,tsx}'],
    setupFiles: ['src/test/setup.ts'],
  },
});
