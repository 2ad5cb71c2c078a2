// The ioredis client every Node target uses, built only from the environment so that the
// manifest's env is the complete record of the client settings. Settings not listed here are
// left at ioredis's defaults (the startup line prints the effective values of the ones that
// matter to a rate limiter).

import { Redis } from 'ioredis';
import { log } from './runtime.js';

export const RETRY_STRATEGIES = {
  // Leave `retryStrategy` unset: whatever the installed ioredis does. In ioredis 6 that is
  // min(2^(n-1) * 50, 5000) ms plus 0–199 ms of random jitter before reconnect attempt n.
  'ioredis-default': undefined,
  // ioredis 5's default, min(n * 50, 2000) ms, for comparison with older deployments.
  'linear-50ms-max-2s': (times) => Math.min(times * 50, 2000),
};

/** Reads the IOREDIS_* settings. */
export function readRedisSettings(env) {
  const settings = {
    enableOfflineQueue: env.boolean('IOREDIS_ENABLE_OFFLINE_QUEUE'),
    commandTimeout: env.integer('IOREDIS_COMMAND_TIMEOUT_MS', { min: 1 }),
    connectTimeout: env.integer('IOREDIS_CONNECT_TIMEOUT_MS', { min: 1 }),
    maxRetriesPerRequest: env.integer('IOREDIS_MAX_RETRIES_PER_REQUEST', { min: 0 }),
    retryStrategy: env.oneOf('IOREDIS_RETRY_STRATEGY', Object.keys(RETRY_STRATEGIES)),
  };
  return settings;
}

/** The client options for `settings`; `retryStrategy` only when not the library's own. */
function clientOptions(settings) {
  const options = {
    enableOfflineQueue: settings.enableOfflineQueue,
    commandTimeout: settings.commandTimeout,
    connectTimeout: settings.connectTimeout,
    maxRetriesPerRequest: settings.maxRetriesPerRequest,
  };
  const strategy = RETRY_STRATEGIES[settings.retryStrategy];
  if (strategy) options.retryStrategy = strategy;
  return options;
}

/** The effective values (after ioredis merged its defaults) worth recording. */
export function effectiveOptions(client, settings) {
  const o = client.options;
  const where = o.sentinels
    ? { sentinels: o.sentinels.map((s) => `${s.host}:${s.port}`), name: o.name }
    : { url: `redis://${o.host}:${o.port}/${o.db ?? 0}` };
  return {
    ...where,
    enableOfflineQueue: o.enableOfflineQueue,
    commandTimeout: o.commandTimeout,
    connectTimeout: o.connectTimeout,
    maxRetriesPerRequest: o.maxRetriesPerRequest,
    retryStrategy: settings.retryStrategy,
    autoResendUnfulfilledCommands: o.autoResendUnfulfilledCommands,
    enableReadyCheck: o.enableReadyCheck,
    enableAutoPipelining: o.enableAutoPipelining,
    protocol: o.protocol,
    keepAlive: o.keepAlive,
    socketTimeout: o.socketTimeout ?? null,
    lazyConnect: o.lazyConnect,
  };
}

/**
 * Creates the client (it starts connecting at once) and logs its connection events: the
 * log then shows when each instance lost Redis and when it got it back. Given `sentinel`
 * ({sentinels, name}), ioredis asks the sentinels for the primary on every (re)connect
 * instead of using `url`, so it follows a failover.
 */
export function createRedis(url, settings, sentinel) {
  const client = sentinel
    ? new Redis({ sentinels: sentinel.sentinels, name: sentinel.name, ...clientOptions(settings) })
    : new Redis(url, clientOptions(settings));
  let lastError = null;
  let repeats = 0;
  client.on('error', (err) => {
    const text = `${err.code ?? err.name}: ${err.message}`;
    if (text === lastError) {
      repeats += 1;
      return;
    }
    if (repeats > 0) log(`redis: (previous error repeated ${repeats} more times)`);
    lastError = text;
    repeats = 0;
    log(`redis: error ${text}`);
  });
  client.on('ready', () => {
    if (repeats > 0) log(`redis: (previous error repeated ${repeats} more times)`);
    lastError = null;
    repeats = 0;
    log('redis: ready');
  });
  client.on('close', () => log('redis: connection closed'));
  client.on('reconnecting', (delay) => log(`redis: reconnecting in ${delay} ms`));
  client.on('end', () => log('redis: no more reconnection attempts'));
  return client;
}

/** Resolves once the client has emitted `ready` (at once if it already is). */
export function whenReady(client) {
  if (client.status === 'ready') return Promise.resolve();
  log(`redis: waiting for ready (status ${client.status})`);
  return new Promise((resolve, reject) => {
    const onReady = () => {
      client.off('end', onEnd);
      resolve();
    };
    const onEnd = () => {
      client.off('ready', onReady);
      reject(new Error('the Redis client gave up reconnecting before it was ready'));
    };
    client.once('ready', onReady);
    client.once('end', onEnd);
  });
}

/** The client kind runTarget uses by default (see lib/target.js). */
export const ioredis = {
  name: 'ioredis',
  logKey: 'ioredis',
  packages: ['ioredis'],
  readSettings: readRedisSettings,
  create: createRedis,
  effectiveOptions,
  whenReady,
  close: async (client) => client.disconnect(),
};
