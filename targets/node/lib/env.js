// Reading a target's settings from its environment. Every setting comes from target.toml's
// [start.env] (the harness records that env as "the exact settings"), so nothing here has a
// default: a missing or invalid variable stops the process at start with exit code 64
// (EX_USAGE) and one line per problem.

export const EXIT_CONFIG = 64;

export class Env {
  constructor(source = process.env) {
    this.source = source;
    this.problems = [];
  }

  #raw(name) {
    const value = this.source[name];
    if (value === undefined || value === '') {
      this.problems.push(`${name} is missing (set it in the target's target.toml [start.env])`);
      return undefined;
    }
    return value;
  }

  string(name) {
    return this.#raw(name);
  }

  /** A setting only some runs give (a Sentinel topology's): undefined when absent. */
  optional(name) {
    const value = this.source[name];
    return value === undefined || value === '' ? undefined : value;
  }

  /** A whole number >= min. */
  integer(name, { min = 0 } = {}) {
    const raw = this.#raw(name);
    if (raw === undefined) return undefined;
    if (!/^-?\d+$/.test(raw.trim()) || Number(raw) < min || !Number.isSafeInteger(Number(raw))) {
      this.problems.push(`${name}=${JSON.stringify(raw)} is not a whole number >= ${min}`);
      return undefined;
    }
    return Number(raw);
  }

  boolean(name) {
    const raw = this.#raw(name);
    if (raw === undefined) return undefined;
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    this.problems.push(`${name}=${JSON.stringify(raw)} must be "true" or "false"`);
    return undefined;
  }

  oneOf(name, choices) {
    const raw = this.#raw(name);
    if (raw === undefined) return undefined;
    if (!choices.includes(raw)) {
      this.problems.push(`${name}=${JSON.stringify(raw)} must be one of: ${choices.join(', ')}`);
      return undefined;
    }
    return raw;
  }

  /** Adds a problem found by a check across several settings. */
  refuse(message) {
    this.problems.push(message);
  }

  /** Exits with 64 if anything was missing or invalid. */
  done(program) {
    if (this.problems.length === 0) return;
    for (const p of this.problems) {
      process.stderr.write(`${program}: configuration error: ${p}\n`);
    }
    process.exit(EXIT_CONFIG);
  }
}

/** The settings every Node target shares: where to listen, the limit, the caller header. */
export function readCommon(env) {
  const common = {
    bind: env.string('FAILMODE_BIND'),
    port: env.integer('FAILMODE_PORT', { min: 1 }),
    redisUrl: env.string('FAILMODE_REDIS_URL'),
    instanceId: env.string('FAILMODE_INSTANCE_ID'),
    instanceCount: env.integer('FAILMODE_INSTANCE_COUNT', { min: 1 }),
    limit: env.integer('FAILMODE_LIMIT', { min: 1 }),
    windowMs: env.integer('FAILMODE_WINDOW_MS', { min: 1 }),
    callerHeader: env.string('FAILMODE_CALLER_HEADER')?.toLowerCase(),
  };
  if (common.port !== undefined && common.port > 65535) {
    env.refuse(`FAILMODE_PORT=${common.port} is not a TCP port`);
  }
  // 127.0.0.1 as failmode starts it; 0.0.0.0 only as the container image sets it
  // (targets/node/Dockerfile: docker-compose.yml publishes the port on the host's loopback).
  if (common.bind !== undefined && common.bind !== '127.0.0.1' && common.bind !== '0.0.0.0') {
    env.refuse(
      `FAILMODE_BIND=${JSON.stringify(common.bind)}: failmode targets listen on 127.0.0.1 ` +
        '(or 0.0.0.0 inside their container image) only',
    );
  }
  if (common.redisUrl !== undefined && !/^redis:\/\//.test(common.redisUrl)) {
    env.refuse(`FAILMODE_REDIS_URL=${JSON.stringify(common.redisUrl)} must be a redis:// URL`);
  }
  common.sentinel = readSentinel(env);
  return common;
}

/**
 * The sentinels to ask for the primary (FAILMODE_REDIS_SENTINELS, host:port,host:port) and
 * the name they monitor it under, in a Sentinel topology (the manifest's [start.sentinel_env]);
 * undefined otherwise: the client then connects to FAILMODE_REDIS_URL.
 */
function readSentinel(env) {
  const list = env.optional('FAILMODE_REDIS_SENTINELS');
  if (list === undefined) return undefined;
  const sentinels = [];
  for (const addr of list.split(',')) {
    const m = /^\s*([^:\s]+):(\d{1,5})\s*$/.exec(addr);
    if (!m || Number(m[2]) > 65535) {
      env.refuse(`FAILMODE_REDIS_SENTINELS: ${JSON.stringify(addr)} is not host:port`);
      continue;
    }
    sentinels.push({ host: m[1], port: Number(m[2]) });
  }
  return { sentinels, name: env.string('FAILMODE_REDIS_SENTINEL_MASTER') };
}
