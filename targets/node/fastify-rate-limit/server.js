// fastify 5 + @fastify/rate-limit with `redis:` an ioredis client (the plugin's RedisStore:
// one Lua script per request, INCR + PEXPIRE). FASTIFY_RL_SKIP_ON_ERROR is the plugin's
// `skipOnError`: false (its default) lets the store's error reach fastify's default error
// handler (500); true admits the request as if it were under the limit.

import Fastify from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { MISSING_CALLER, callerOf } from '../lib/runtime.js';
import { runTarget } from '../lib/target.js';

await runTarget({
  program: 'fastify-rate-limit',
  packages: ['fastify', '@fastify/rate-limit', 'ioredis'],
  readVariant: (env) => ({
    skipOnError: env.boolean('FASTIFY_RL_SKIP_ON_ERROR'),
  }),
  build: async ({ client, common, variant }) => {
    const header = common.callerHeader;
    const app = Fastify();

    // The plugin's store only defines its Lua command on the client (nothing is sent until
    // the first request), so it has no start-up race; it is still registered only once the
    // client is ready, like every Node target.
    await app.register(rateLimit, {
      redis: client,
      max: common.limit,
      timeWindow: common.windowMs,
      skipOnError: variant.skipOnError,
      keyGenerator: (req) => req.headers[header],
    });

    app.get('/healthz', { config: { rateLimit: false } }, async (req, reply) => {
      reply.type('text/plain');
      return 'ok\n';
    });

    app.get(
      '/api',
      {
        // Route hooks run before the hook the plugin appends to this route.
        onRequest: async (req, reply) => {
          if (callerOf(req.headers, header) === null) {
            reply.code(400).type('text/plain').send(MISSING_CALLER(header));
            return reply;
          }
        },
      },
      async (req, reply) => {
        reply.type('text/plain');
        return 'ok';
      },
    );

    return {
      listen: async () => {
        await app.listen({ port: common.port, host: common.bind });
      },
      close: () => app.close(),
      limiter: {
        store: '@fastify/rate-limit RedisStore (redis: ioredis)',
        max: common.limit,
        timeWindow: common.windowMs,
        skipOnError: variant.skipOnError,
        keyGenerator: `${header} header`,
        hook: 'onRequest',
        nameSpace: 'fastify-rate-limit-',
      },
    };
  },
});
