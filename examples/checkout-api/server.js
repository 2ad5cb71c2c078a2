// checkout-api: a small service as a team would write it, with its own rate limiter. Nothing
// here knows about failmode: the limit and the Redis client options come from config.json, the
// port and the Redis address from the environment, as in production. Each caller (by client
// address: express-rate-limit's default key) gets `limit` requests per `windowMs`, counted in
// Redis so that every instance shares the count. When Redis fails, passOnStoreError lets the
// request through: the team chose to serve rather than refuse.

import { readFileSync } from 'node:fs';
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import { RedisStore } from 'rate-limit-redis';
import { Redis } from 'ioredis';

const config = JSON.parse(readFileSync(new URL('./config.json', import.meta.url), 'utf8'));
const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const redis = new Redis(redisUrl, config.redis);
// ioredis reports a lost connection as an 'error' event: log it, keep serving.
redis.on('error', (err) => console.error(`redis: ${err.message}`));
// rate-limit-redis loads its script when the store is made; with the offline queue off that
// fails unless the connection is up, and every request would then skip the limit. So the
// service starts listening only once Redis is ready.
await new Promise((resolve) => redis.once('ready', resolve));

const limiter = rateLimit({
  windowMs: config.rateLimit.windowMs,
  limit: config.rateLimit.limit,
  passOnStoreError: config.rateLimit.passOnStoreError,
  standardHeaders: 'draft-8',
  legacyHeaders: false,
  store: new RedisStore({
    prefix: 'checkout-api:rl:',
    sendCommand: (command, ...args) => redis.call(command, ...args),
  }),
});

const app = express();
app.get('/healthz', (req, res) => res.type('text/plain').send('ok\n'));
app.get('/api/cart', limiter, (req, res) => res.json({ items: [], total: 0 }));

const server = app.listen(port, host, () => {
  console.log(
    `checkout-api listening on ${host}:${port}; redis ${redisUrl}; ` +
      `limit ${config.rateLimit.limit} per ${config.rateLimit.windowMs} ms per client address`,
  );
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => redis.quit().finally(() => process.exit(0)));
    server.closeAllConnections();
  });
}
