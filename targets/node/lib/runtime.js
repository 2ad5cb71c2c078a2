// Logging, library versions, the caller header, and a graceful exit on SIGTERM.

import { readFileSync } from 'node:fs';

let prefix = 'failmode-node';

/** Sets the name every log line starts with (the instance id once it is known). */
export function setLogName(name) {
  prefix = name;
}

/** One line on stdout (the harness appends stdout and stderr to the instance's log). */
export function log(message) {
  process.stdout.write(`${new Date().toISOString()} ${prefix} ${message}\n`);
}

/** The installed version of each package, read from its own package.json. */
export function versions(packages) {
  const out = { node: process.versions.node };
  for (const name of packages) {
    const url = new URL(`../node_modules/${name}/package.json`, import.meta.url);
    out[name] = JSON.parse(readFileSync(url, 'utf8')).version;
  }
  return out;
}

/** The startup line: what runs, with which libraries and which exact settings. */
export function logStartup(fields) {
  log(`started ${JSON.stringify(fields)}`);
}

/**
 * The caller key of a request: the header's value, or null when it is missing or empty
 * (the caller then gets 400: keying by caller is the contract, there is no fallback key).
 */
export function callerOf(headers, name) {
  const value = headers[name];
  if (typeof value !== 'string') return null;
  return value.trim() === '' ? null : value;
}

export const MISSING_CALLER = (name) => `missing ${name} header\n`;

const closers = [];
let stopping = false;

/** Runs `close` (async) on SIGTERM or SIGINT, before the process exits. */
export function onShutdown(close) {
  closers.push(close);
}

/** Installs the signal handlers: close everything within `graceMs`, then exit 0. */
export function installShutdown(graceMs = 1500) {
  const stop = (signal) => {
    if (stopping) {
      log(`${signal} again: exiting now`);
      process.exit(0);
    }
    stopping = true;
    log(`${signal}: shutting down`);
    const deadline = setTimeout(() => {
      log(`shutdown took over ${graceMs} ms: exiting anyway`);
      process.exit(0);
    }, graceMs);
    deadline.unref();
    Promise.allSettled(closers.map((c) => c())).then((results) => {
      for (const r of results) {
        if (r.status === 'rejected') log(`shutdown: ${r.reason?.message ?? r.reason}`);
      }
      log('stopped');
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** Logs a fatal error and exits 1 (a runtime failure; configuration errors exit 64). */
export function fatal(err) {
  log(`fatal: ${err?.stack ?? err}`);
  process.exit(1);
}
