// What every Node target does around its limiter: read the env (exit 64 on a bad setting),
// log the startup line, connect the Redis client (ioredis unless the target picks another)
// and wait for `ready`, build the limiter and the HTTP server, listen on 127.0.0.1:{port},
// and exit cleanly on SIGTERM.

import { Env, readCommon } from './env.js';
import { ioredis } from './redis.js';
import {
  fatal,
  installShutdown,
  log,
  logStartup,
  onShutdown,
  setLogName,
  versions,
} from './runtime.js';

/**
 * @param {object} spec
 * @param {string} spec.program      the target family, for messages
 * @param {string[]} spec.packages   the libraries whose versions the startup line shows
 * @param {(env: Env, common: object) => object} spec.readVariant  the family's own settings
 * @param {(variant: object) => object | Promise<object>} [spec.clientKind]  which Redis
 *        client: `ioredis` (lib/redis.js, the default) or `nodeRedis` (lib/node-redis.js), from
 *        the variant's settings (a promise, to load a client only when it is used); the
 *        client's own settings and packages come with it
 * @param {(ctx: {client, common, variant}) => object} [spec.beforeReady]  called right after
 *        the client is created, before it is ready; what it returns is passed to `build` as
 *        `early`. Only for a target that deliberately builds its limiter too early.
 * @param {(ctx: {client, common, variant, early}) => Promise<{limiter: object, listen: () => Promise<void>, close: () => Promise<void>}>} spec.build
 *        builds the limiter and server once the client is ready; `limiter` describes the
 *        limiter's effective settings for the log
 */
export async function runTarget({
  program,
  packages,
  readVariant,
  clientKind = () => ioredis,
  beforeReady,
  build,
}) {
  const env = new Env();
  const common = readCommon(env);
  const variant = readVariant(env, common);
  const kind = await clientKind(variant);
  const redisSettings = kind?.readSettings(env);
  env.done(program);

  setLogName(common.instanceId);
  installShutdown();
  process.on('unhandledRejection', (reason) => fatal(reason));

  // A client kind that takes no sentinels (node-redis here) keeps the one address.
  const client = kind.create(common.redisUrl, redisSettings, common.sentinel);
  onShutdown(async () => kind.close(client));
  logStartup({
    program,
    pid: process.pid,
    versions: versions([...packages, ...kind.packages.filter((p) => !packages.includes(p))]),
    listen: `${common.bind}:${common.port}`,
    instance: common.instanceId,
    instances: common.instanceCount,
    limit: common.limit,
    windowMs: common.windowMs,
    callerHeader: common.callerHeader,
    variant,
    [kind.logKey]: kind.effectiveOptions(client, redisSettings),
  });

  try {
    const early = beforeReady ? beforeReady({ client, common, variant }) : undefined;
    // The limiter is built only once the client is ready: with the offline queue off, a
    // command sent before `ready` fails at once, and some stores cache that failure.
    await kind.whenReady(client);
    const server = await build({ client, common, variant, early });
    onShutdown(server.close);
    await server.listen();
    log(`limiter ${JSON.stringify(server.limiter)}`);
    log(`ready: listening on http://${common.bind}:${common.port} (GET /healthz, GET /api)`);
  } catch (err) {
    fatal(err);
  }
}

/** Resolves after `ms`. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
