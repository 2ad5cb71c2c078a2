"""Every setting of the flask-limiter target, read from the environment.

The manifest (target.toml) sets each of them explicitly, so the run results record the exact
settings. Nothing here has a default: a missing or invalid value stops the process at start
with exit code 64 (EX_USAGE) and a message naming the variable.

Imported by gunicorn.conf.py in gunicorn's arbiter (so a bad setting fails before any worker
is forked, with exit 64 rather than gunicorn's "worker failed to boot" exit 3) and again by
app.py in the worker. It imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from urllib.parse import urlsplit, urlunsplit

EX_USAGE = 64

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
STRATEGIES = ("fixed-window", "moving-window", "sliding-window-counter")


class SettingError(Exception):
    pass


def _raw(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise SettingError(f"{name} is not set")
    value = value.strip()
    if not value:
        raise SettingError(f"{name} is empty")
    return value


def _header(name: str) -> str:
    raw = _raw(name)
    if not re.fullmatch(r"[A-Za-z0-9-]+", raw):
        raise SettingError(f"{name}={raw!r} is not a header name (letters, digits, -)")
    return raw.lower()


def _int(name: str, lo: int, hi: int) -> int:
    raw = _raw(name)
    try:
        value = int(raw, 10)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise SettingError(f"{name}={value} is outside {lo}..{hi}")
    return value


def _seconds(name: str, lo: float, hi: float) -> float:
    raw = _raw(name)
    try:
        value = float(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or not lo <= value <= hi:
        raise SettingError(f"{name}={raw} is outside {lo}..{hi} seconds")
    return value


def _bool(name: str) -> bool:
    raw = _raw(name).lower()
    if raw in ("true", "1", "yes"):
        return True
    if raw in ("false", "0", "no"):
        return False
    raise SettingError(f"{name}={raw!r} is not true or false")


def _choice(name: str, choices: tuple[str, ...]) -> str:
    raw = _raw(name)
    if raw not in choices:
        raise SettingError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def limit_string(limit: int, window_ms: int) -> str:
    """The `limits` string for `limit` per `window_ms`, e.g. "50 per 1 second".

    `limits` knows seconds, minutes, hours, days, months and years, and a window's expiry in
    Redis is a whole number of seconds: a window that is not a whole number of seconds
    cannot be expressed and is refused.
    """
    if window_ms % 1000 != 0:
        raise SettingError(
            f"FAILMODE_WINDOW_MS={window_ms}: flask-limiter (limits) cannot express a window "
            "that is not a whole number of seconds"
        )
    return f"{limit} per {window_ms // 1000} second"


def redacted_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


@dataclasses.dataclass(frozen=True)
class Settings:
    # where and what
    bind: str
    port: int
    instance_id: str
    caller_header: str
    limit: int
    window_ms: int
    limit_string: str
    # redis-py, through limits' storage options
    redis_url: str
    # limits' storage URI: redis_url, or redis+sentinel://… in a Sentinel topology
    storage_uri: str
    redis_socket_timeout: float
    redis_socket_connect_timeout: float
    redis_retries: int
    # flask-limiter (the variable names are flask-limiter's config keys)
    strategy: str
    swallow_errors: bool
    in_memory_fallback_enabled: bool
    headers_enabled: bool
    # gunicorn
    workers: int
    worker_class: str
    threads: int
    keepalive: int
    timeout: int
    graceful_timeout: int
    backlog: int
    log_level: str
    log_tracebacks: bool


def load() -> Settings:
    """Reads and checks every setting; raises SettingError naming the first bad one."""
    limit = _int("FAILMODE_LIMIT", 1, 10**9)
    window_ms = _int("FAILMODE_WINDOW_MS", 1, 10**12)
    redis_url = _raw("FAILMODE_REDIS_URL")
    if urlsplit(redis_url).scheme not in ("redis", "rediss", "redis+unix"):
        raise SettingError(f"FAILMODE_REDIS_URL={redacted_url(redis_url)!r} is not a redis:// URL")
    # Only in a Sentinel topology (the manifest's [start.sentinel_env]): limits' own
    # redis+sentinel:// storage, which asks the sentinels for the primary.
    sentinels = os.environ.get("FAILMODE_REDIS_SENTINELS", "").strip()
    storage_uri = redis_url
    if sentinels:
        for addr in sentinels.split(","):
            if not re.fullmatch(r"[^:\s]+:\d{1,5}", addr.strip()):
                raise SettingError(f"FAILMODE_REDIS_SENTINELS: {addr!r} is not host:port")
        storage_uri = f"redis+sentinel://{sentinels}/{_raw('FAILMODE_REDIS_SENTINEL_MASTER')}"
    return Settings(
        bind=_raw("FAILMODE_BIND"),
        port=_int("FAILMODE_PORT", 1, 65535),
        instance_id=_raw("FAILMODE_INSTANCE_ID"),
        caller_header=_header("FAILMODE_CALLER_HEADER"),
        limit=limit,
        window_ms=window_ms,
        limit_string=limit_string(limit, window_ms),
        redis_url=redis_url,
        storage_uri=storage_uri,
        redis_socket_timeout=_seconds("FAILMODE_REDIS_SOCKET_TIMEOUT", 0.001, 60),
        redis_socket_connect_timeout=_seconds("FAILMODE_REDIS_SOCKET_CONNECT_TIMEOUT", 0.001, 60),
        redis_retries=_int("FAILMODE_REDIS_RETRIES", 0, 10),
        strategy=_choice("RATELIMIT_STRATEGY", STRATEGIES),
        swallow_errors=_bool("RATELIMIT_SWALLOW_ERRORS"),
        in_memory_fallback_enabled=_bool("RATELIMIT_IN_MEMORY_FALLBACK_ENABLED"),
        headers_enabled=_bool("RATELIMIT_HEADERS_ENABLED"),
        workers=_int("FAILMODE_GUNICORN_WORKERS", 1, 64),
        worker_class=_choice("FAILMODE_GUNICORN_WORKER_CLASS", ("gthread", "sync")),
        threads=_int("FAILMODE_GUNICORN_THREADS", 1, 256),
        keepalive=_int("FAILMODE_GUNICORN_KEEPALIVE_S", 0, 3600),
        timeout=_int("FAILMODE_GUNICORN_TIMEOUT_S", 0, 3600),
        graceful_timeout=_int("FAILMODE_GUNICORN_GRACEFUL_TIMEOUT_S", 0, 3600),
        backlog=_int("FAILMODE_GUNICORN_BACKLOG", 1, 65535),
        log_level=_choice("FAILMODE_LOG_LEVEL", LOG_LEVELS),
        log_tracebacks=_bool("FAILMODE_LOG_TRACEBACKS"),
    )


def load_or_exit() -> Settings:
    try:
        return load()
    except SettingError as e:
        print(f"flask-limiter target: invalid settings: {e}", file=sys.stderr, flush=True)
        sys.exit(EX_USAGE)
