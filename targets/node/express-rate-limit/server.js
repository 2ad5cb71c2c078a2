// express 5 + express-rate-limit 8 + rate-limit-redis on ioredis, as rate-limit-redis's
// readme shows it: `sendCommand: (command, ...args) => client.call(command, ...args)`.
// ERL_PASS_ON_STORE_ERROR is express-rate-limit's `passOnStoreError`: false (its default)
// passes the store's error to Express (500); true logs it and admits the request.
// ERL_BUILD is when the store and limiter are created: "after-ready" (the right way, below)
// or "eager", deliberately wrong: at start, before the ioredis client is ready, as a service
// that builds its middleware at module load does. Its SCRIPT LOAD fails at once (offline
// queue off), rate-limit-redis keeps that failure, and every request is a 500 with a healthy
// Redis while /healthz answers 200: a target broken from the start, for the harness to flag.

import { rateLimit } from 'express-rate-limit';
import { RedisStore } from 'rate-limit-redis';
import { expressServer } from '../lib/express-app.js';
import { whenReady } from '../lib/redis.js';
import { log } from '../lib/runtime.js';
import { runTarget, sleep } from '../lib/target.js';

/** rate-limit-redis's store on ioredis, and express-rate-limit's middleware over it. */
function createLimiter(client, common, variant) {
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
  return { store, limiter };
}

/** What the log's `limiter` line records. */
function describe(store, common, variant) {
  return {
    store: 'rate-limit-redis RedisStore (sendCommand: client.call)',
    windowMs: common.windowMs,
    limit: common.limit,
    passOnStoreError: variant.passOnStoreError,
    keyGenerator: `${common.callerHeader} header`,
    prefix: store.prefix,
    built: variant.build,
  };
}

await runTarget({
  program: 'express-rate-limit',
  packages: ['express', 'express-rate-limit', 'rate-limit-redis'],
  readVariant: (env) => ({
    passOnStoreError: env.boolean('ERL_PASS_ON_STORE_ERROR'),
    build: env.oneOf('ERL_BUILD', ['after-ready', 'eager']),
  }),
  // Deliberately wrong (ERL_BUILD=eager): created as soon as the client exists, before it
  // is ready. express-rate-limit calls the store's `init` at once, which sends both SCRIPT
  // LOADs; ioredis fails them (offline queue off, not connected yet), express-rate-limit
  // logs "async error during store initialization", and the store keeps the rejected
  // promises: every request awaits them and fails.
  beforeReady: ({ client, common, variant }) => {
    if (variant.build !== 'eager') return undefined;
    log(`ERL_BUILD=eager: building the store before the client is ready (client status ${client.status}); deliberately wrong`);
    return createLimiter(client, common, variant);
  },
  build: async ({ client, common, variant, early }) => {
    if (early) {
      // Served as built, however its scripts fared; the server still listens only once the
      // client is ready, so /healthz means what it means for every target.
      const server = expressServer({ common, limiter: early.limiter });
      return { ...server, limiter: describe(early.store, common, variant) };
    }
    // rate-limit-redis loads its two Lua scripts (SCRIPT LOAD) in `init`, which
    // express-rate-limit calls as soon as the limiter is created, and keeps the promise of
    // each SHA for good: if SCRIPT LOAD fails (client not ready with the offline queue off,
    // or the 20 ms commandTimeout), every later request fails with that cached error. So
    // the limiter is created only once the client is ready, and is not served until both
    // scripts are loaded; if a load fails, a fresh store and limiter are built.
    for (let attempt = 1; ; attempt++) {
      await whenReady(client);
      const { store, limiter } = createLimiter(client, common, variant);
      try {
        await Promise.all([store.incrementScriptSha, store.getScriptSha]);
      } catch (err) {
        log(`rate-limit-redis could not load its scripts (attempt ${attempt}): ${err.message}; building the limiter again`);
        await sleep(250);
        continue;
      }
      const server = expressServer({ common, limiter });
      return { ...server, limiter: describe(store, common, variant) };
    }
  },
});
