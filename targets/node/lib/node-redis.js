// The node-redis client (npm `redis`, the official client) for the targets that use it,
// built only from the environment like the ioredis one (lib/redis.js), so that the
// manifest's env is the complete record of the client settings. Settings not listed here
// are left at node-redis's defaults; the startup line prints the effective values of the
// ones that matter to a rate limiter.
//
// What node-redis 6 offers to bound a command, read from its source (@redis/client
// dist/lib/client/commands-queue.js, socket.js) and its docs (docs/command-options.md,
// docs/client-configuration.md), and measured here (targets/node/README.md):
// - `commandOptions.timeout` (and `abortSignal`): a timer per command that is removed when
//   the command is written to the socket. "This applies to commands that haven't been
//   written to the socket yet." A command already written to a hung Redis waits for its
//   reply, however long that takes. There is no reply timeout.
// - `socket.socketTimeout`: an idle timeout on the socket (no data sent *or* received for
//   N ms), so every new command resets it: under steady traffic it never fires on a hung
//   Redis. When it does fire, the default reconnect strategy does not reconnect after a
//   SocketTimeoutError: the client is closed for good.

import { createClient } from 'redis';
import { log } from './runtime.js';

// node-redis 6's defaults for what this file does not set, from @redis/client's source
// (lib/defaults.js, lib/client/socket.js, RESP/types.js), for the startup line.
const SOCKET_DEFAULTS = { noDelay: true, keepAlive: true, keepAliveInitialDelay: 30000 };
const DEFAULT_RESP = 3;

export const RECONNECT_STRATEGIES = {
  // Leave `socket.reconnectStrategy` unset: whatever the installed node-redis does. In
  // node-redis 6: after a ready connection drops, the first attempt at once; then
  // min(2^n * 50, 2000) ms + 0–199 ms jitter before attempt n + 1 (100, 200, 400, 800,
  // 1600, then 2000 ms), and no reconnection at all after a SocketTimeoutError.
  'node-redis-default': undefined,
};

/** A whole number of milliseconds >= 1, or "none" (null: the option is left unset). */
function millisOrNone(env, name) {
  const raw = env.source[name];
  if (raw === 'none') return null;
  if (raw !== undefined && raw !== '' && !/^\d+$/.test(raw.trim())) {
    env.refuse(`${name}=${JSON.stringify(raw)} must be a whole number of milliseconds or "none"`);
    return undefined;
  }
  return env.integer(name, { min: 1 });
}

/** Reads the NODE_REDIS_* settings. */
export function readSettings(env) {
  return {
    disableOfflineQueue: env.boolean('NODE_REDIS_DISABLE_OFFLINE_QUEUE'),
    connectTimeout: env.integer('NODE_REDIS_CONNECT_TIMEOUT_MS', { min: 1 }),
    commandTimeout: env.integer('NODE_REDIS_COMMAND_TIMEOUT_MS', { min: 1 }),
    socketTimeout: millisOrNone(env, 'NODE_REDIS_SOCKET_TIMEOUT_MS'),
    reconnectStrategy: env.oneOf('NODE_REDIS_RECONNECT_STRATEGY', Object.keys(RECONNECT_STRATEGIES)),
  };
}

/** The createClient options for `settings`. */
function clientOptions(url, settings) {
  const socket = { connectTimeout: settings.connectTimeout };
  if (settings.socketTimeout !== null) socket.socketTimeout = settings.socketTimeout;
  const strategy = RECONNECT_STRATEGIES[settings.reconnectStrategy];
  if (strategy) socket.reconnectStrategy = strategy;
  return {
    url,
    disableOfflineQueue: settings.disableOfflineQueue,
    socket,
    commandOptions: { timeout: settings.commandTimeout },
  };
}

/** The effective values (node-redis's defaults filled in) worth recording. */
export function effectiveOptions(client, settings) {
  const o = client.options;
  const s = { ...SOCKET_DEFAULTS, ...o.socket };
  return {
    url: `redis://${s.host}:${s.port}/${o.database ?? 0}`,
    RESP: o.RESP ?? DEFAULT_RESP,
    disableOfflineQueue: o.disableOfflineQueue,
    connectTimeout: s.connectTimeout,
    // The client's default command options (what every command gets): a timeout that
    // only runs until the command is written.
    commandTimeout: client._commandOptions?.timeout ?? null,
    socketTimeout: s.socketTimeout ?? null,
    reconnectStrategy: settings.reconnectStrategy,
    pingInterval: o.pingInterval ?? null,
    commandsQueueMaxLength: o.commandsQueueMaxLength ?? null,
    keepAlive: s.keepAlive,
    keepAliveInitialDelay: s.keepAliveInitialDelay,
    noDelay: s.noDelay,
    maintNotifications: o.maintNotifications,
  };
}

/**
 * Creates the client, starts connecting (`connect()` retries by the reconnect strategy
 * until ready), and logs its connection events: `reconnecting` is emitted when an attempt
 * starts (after the strategy's delay), so the log shows when each attempt was made.
 */
export function create(url, settings) {
  const client = createClient(clientOptions(url, settings));
  let lastError = null;
  let repeats = 0;
  const flushRepeats = () => {
    if (repeats > 0) log(`redis: (previous error repeated ${repeats} more times)`);
    lastError = null;
    repeats = 0;
  };
  // node-redis throws an `error` event without a listener: this one is also what keeps a
  // lost connection from crashing the process.
  client.on('error', (err) => {
    const text = `${err.code ?? err.name}: ${err.message}`;
    if (text === lastError) {
      repeats += 1;
      return;
    }
    flushRepeats();
    lastError = text;
    log(`redis: error ${text}`);
  });
  client.on('ready', () => {
    flushRepeats();
    log('redis: ready');
  });
  client.on('reconnecting', () => log('redis: reconnecting'));
  client.on('terminated', (cause) => {
    flushRepeats();
    log(`redis: no more reconnection attempts (${cause?.name ?? cause}: ${cause?.message ?? ''}); every command now fails`);
  });
  client.on('end', () => log('redis: connection closed (client destroyed)'));
  client.connect().catch((err) => log(`redis: connect() gave up: ${err.message}`));
  return client;
}

/** Resolves once the client is ready (at once if it already is). */
export function whenReady(client) {
  if (client.isReady) return Promise.resolve();
  log('redis: waiting for ready');
  return new Promise((resolve, reject) => {
    const onReady = () => {
      client.off('terminated', onTerminated);
      resolve();
    };
    const onTerminated = () => {
      client.off('ready', onReady);
      reject(new Error('the Redis client gave up reconnecting before it was ready'));
    };
    client.once('ready', onReady);
    client.once('terminated', onTerminated);
  });
}

/** The client kind runTarget uses (see lib/target.js). */
export const nodeRedis = {
  name: 'node-redis',
  logKey: 'redis',
  packages: ['redis', '@redis/client'],
  readSettings,
  create,
  effectiveOptions,
  whenReady,
  close: async (client) => client.destroy(),
};
