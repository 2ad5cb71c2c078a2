// express 5 + rate-limiter-flexible's RateLimiterRedis, with the library's own
// documented Express middleware (README → wiki "Express Middleware", and CONTEXT.md
// "Common Patterns → Express Middleware"):
//
//   rateLimiter.consume(req.ip)
//     .then(() => next())
//     .catch(() => res.status(429).send('Too Many Requests'));
//
// `consume` rejects with a RateLimiterRes when the caller is over the limit and with an
// Error when the store fails; that middleware answers 429 to both. RLF_INSURANCE selects
// the `insuranceLimiter`: "none", or "memory-share", a RateLimiterMemory allowing
// floor(limit / instances) per instance, which answers instead of Redis while Redis errs.
// RLF_CLIENT selects the Redis client: "ioredis" (IOREDIS_* settings; rate-limiter-flexible
// target.toml) or "node-redis", the `redis` package (NODE_REDIS_* settings;
// rate-limiter-flexible-node-redis/target.toml), passed with `useRedisPackage: true` as
// CONTEXT.md "Redis-Specific Setup" shows.

import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import { expressServer } from '../lib/express-app.js';
import { ioredis } from '../lib/redis.js';
import { runTarget } from '../lib/target.js';

// node-redis is loaded only when used (importing `redis` costs ~0.1 s and ~25 MB).
const CLIENTS = {
  ioredis: async () => ioredis,
  'node-redis': async () => (await import('../lib/node-redis.js')).nodeRedis,
};

await runTarget({
  program: 'rate-limiter-flexible',
  packages: ['express', 'rate-limiter-flexible'],
  readVariant: (env, common) => {
    const client = env.oneOf('RLF_CLIENT', Object.keys(CLIENTS));
    const insurance = env.oneOf('RLF_INSURANCE', ['none', 'memory-share']);
    if (common.windowMs !== undefined && common.windowMs % 1000 !== 0) {
      env.refuse(
        `FAILMODE_WINDOW_MS=${common.windowMs}: rate-limiter-flexible's duration is a whole number of seconds; use a window of 1s, 2s, …`,
      );
    }
    return { client, insurance };
  },
  clientKind: (variant) => CLIENTS[variant.client]?.(),
  build: async ({ client, common, variant }) => {
    const duration = common.windowMs / 1000;
    const insurancePoints = Math.floor(common.limit / common.instanceCount);
    const insuranceLimiter =
      variant.insurance === 'memory-share'
        ? new RateLimiterMemory({ points: insurancePoints, duration })
        : undefined;
    // rate-limiter-flexible recognises node-redis by its class name ('Commander', node-redis
    // 4); node-redis 6's client class is named 'Class', so without `useRedisPackage: true`
    // it calls `client.rlflxIncr` (an ioredis defineCommand) and every consume rejects with
    // "TypeError: this.client.rlflxIncr is not a function" (checked: a 429 for everything).
    const useRedisPackage = variant.client === 'node-redis';
    const rateLimiter = new RateLimiterRedis({
      storeClient: client,
      useRedisPackage,
      points: common.limit,
      duration,
      insuranceLimiter,
    });

    // The middleware exactly as the library documents it (only the key differs: the
    // caller header instead of req.ip).
    const rateLimiterMiddleware = (req, res, next) => {
      rateLimiter
        .consume(req.failmodeCaller)
        .then(() => next())
        .catch(() => res.status(429).send('Too Many Requests'));
    };

    const server = expressServer({ common, limiter: rateLimiterMiddleware });
    return {
      ...server,
      limiter: {
        store: `RateLimiterRedis (storeClient: ${variant.client}${useRedisPackage ? ', useRedisPackage: true' : ''})`,
        points: common.limit,
        duration,
        keyPrefix: rateLimiter.keyPrefix,
        rejectIfRedisNotReady: false,
        insuranceLimiter:
          variant.insurance === 'memory-share'
            ? `RateLimiterMemory { points: ${insurancePoints} (floor(${common.limit} / ${common.instanceCount})), duration: ${duration} }`
            : 'none',
        onReject: 'documented Express middleware: any rejection (over limit or store error) → 429',
      },
    };
  },
});
