// What every Node target does around its limiter: read the env (exit 64 on a bad setting),
// log the startup line, connect ioredis and wait for `ready`, build the limiter and the HTTP
// server, listen on 127.0.0.1:{port}, and exit cleanly on SIGTERM.

import { Env, readCommon } from './env.js';
import { createRedis, effectiveOptions, readRedisSettings, whenReady } from './redis.js';
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
 * @param {(ctx: {client, common, variant}) => Promise<{limiter: object, listen: () => Promise<void>, close: () => Promise<void>}>} spec.build
 *        builds the limiter and server once the client is ready; `limiter` describes the
 *        limiter's effective settings for the log
 */
export async function runTarget({ program, packages, readVariant, build }) {
  const env = new Env();
  const common = readCommon(env);
  const redisSettings = readRedisSettings(env);
  const variant = readVariant(env, common);
  env.done(program);

  setLogName(common.instanceId);
  installShutdown();
  process.on('unhandledRejection', (reason) => fatal(reason));

  const client = createRedis(common.redisUrl, redisSettings);
  onShutdown(async () => client.disconnect());
  logStartup({
    program,
    pid: process.pid,
    versions: versions(packages),
    listen: `${common.bind}:${common.port}`,
    instance: common.instanceId,
    instances: common.instanceCount,
    limit: common.limit,
    windowMs: common.windowMs,
    callerHeader: common.callerHeader,
    variant,
    ioredis: effectiveOptions(client, redisSettings),
  });

  try {
    // The limiter is built only once the client is ready: with the offline queue off, a
    // command sent before `ready` fails at once, and some stores cache that failure.
    await whenReady(client);
    const server = await build({ client, common, variant });
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
