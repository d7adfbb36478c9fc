// A tiny server for the browser tests until converge embeds the UI: serves ui/dist with an
// SPA fallback and proxies /api (and the probes) to a converge.

import { createReadStream, existsSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.ico': 'image/x-icon',
};

export function startStaticServer(distDir: string, apiTarget: string, port: number): Promise<http.Server> {
  const target = new URL(apiTarget);
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/api/') || ['/livez', '/readyz', '/healthz'].includes(url)) {
      const up = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: url, headers: { ...req.headers, host: target.host } },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', (e) => {
        res.writeHead(502, { 'content-type': 'application/problem+json' });
        res.end(JSON.stringify({ status: 502, detail: `proxy: ${e.message}` }));
      });
      req.pipe(up);
      return;
    }
    const clean = decodeURIComponent(url.split('?')[0]);
    let file = path.join(distDir, path.normalize(clean).replace(/^([.][.][/\\])+/, ''));
    if (!file.startsWith(distDir) || !existsSync(file) || statSync(file).isDirectory()) file = path.join(distDir, 'index.html');
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}
