// express 5 + express-rate-limit 8 + rate-limit-redis on ioredis, as rate-limit-redis's
// readme shows it: `sendCommand: (command, ...args) => client.call(command, ...args)`.
// ERL_PASS_ON_STORE_ERROR is express-rate-limit's `passOnStoreError`: false (its default)
// passes the store's error to Express (500); true logs it and admits the request.

import { rateLimit } from 'express-rate-limit';
import { RedisStore } from 'rate-limit-redis';
import { expressServer } from '../lib/express-app.js';
import { whenReady } from '../lib/redis.js';
import { log } from '../lib/runtime.js';
import { runTarget, sleep } from '../lib/target.js';

await runTarget({
  program: 'express-rate-limit',
  packages: ['express', 'express-rate-limit', 'rate-limit-redis', 'ioredis'],
  readVariant: (env) => ({
    passOnStoreError: env.boolean('ERL_PASS_ON_STORE_ERROR'),
  }),
  build: async ({ client, common, variant }) => {
    // rate-limit-redis loads its two Lua scripts (SCRIPT LOAD) in `init`, which
    // express-rate-limit calls as soon as the limiter is created, and keeps the promise of
    // each SHA for good: if SCRIPT LOAD fails (client not ready with the offline queue off,
    // or the 20 ms commandTimeout), every later request fails with that cached error. So
    // the limiter is created only once the client is ready, and is not served until both
    // scripts are loaded; if a load fails, a fresh store and limiter are built.
    for (let attempt = 1; ; attempt++) {
      await whenReady(client);
      const store = new RedisStore({
        sendCommand: (command, ...args) => client.call(command, ...args),
      });
      const limiter = rateLimit({
        windowMs: common.windowMs,
        limit: common.limit,
        keyGenerator: (req) => req.failmodeCaller,
        passOnStoreError: variant.passOnStoreError,
        store,
      });
      try {
        await Promise.all([store.incrementScriptSha, store.getScriptSha]);
      } catch (err) {
        log(`rate-limit-redis could not load its scripts (attempt ${attempt}): ${err.message}; building the limiter again`);
        await sleep(250);
        continue;
      }
      const server = expressServer({ common, limiter });
      return {
        ...server,
        limiter: {
          store: 'rate-limit-redis RedisStore (sendCommand: client.call)',
          windowMs: common.windowMs,
          limit: common.limit,
          passOnStoreError: variant.passOnStoreError,
          keyGenerator: `${common.callerHeader} header`,
          prefix: store.prefix,
        },
      };
    }
  },
});
