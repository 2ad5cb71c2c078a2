// The Express 5 application shared by the Express-based targets: GET /healthz, and GET /api
// behind the caller check and the limiter. Errors a middleware passes on go to Express's
// default error handler (finalhandler): status 500 for an error without a status, and the
// error's stack on stderr.

import http from 'node:http';
import express from 'express';
import { MISSING_CALLER, callerOf } from './runtime.js';

/** Answers 400 when the caller header is missing or empty; else stores the key on req. */
export function requireCaller(header) {
  return (req, res, next) => {
    const caller = callerOf(req.headers, header);
    if (caller === null) {
      res.status(400).type('text/plain').send(MISSING_CALLER(header));
      return;
    }
    req.failmodeCaller = caller;
    next();
  };
}

/** The app, and listen/close for it on bind:port. */
export function expressServer({ common, limiter }) {
  const app = express();
  app.get('/healthz', (req, res) => {
    res.type('text/plain').send('ok\n');
  });
  app.get('/api', requireCaller(common.callerHeader), limiter, (req, res) => {
    res.type('text/plain').send('ok');
  });

  const server = http.createServer(app);
  return {
    app,
    listen: () =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(common.port, common.bind, () => {
          server.off('error', reject);
          resolve();
        });
      }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 500).unref();
      }),
  };
}
