"""flask-limiter, as a service would use it, as a failmode target.

Served by gunicorn (see gunicorn.conf.py); every setting comes from the environment the
manifest sets (see settings.py).

  GET /api      limited per caller (the FAILMODE_CALLER_HEADER header): the limit per window,
                flask-limiter's default 429 beyond it; 400 without the header.
  GET /healthz  503 until the limiter's storage has answered a PING once, then 200 for good.
  GET /metrics  failmode_fallback_total: /api requests decided without Redis, by reason
                ("in_memory": by the in-memory fallback; "swallowed": a storage error that
                flask-limiter logged and let through), and failmode_in_memory (1 while the
                in-memory fallback is in use). Readings for the harness, not the library's.

The limiter is flask-limiter with library defaults except what the manifest sets; what it
does on a storage error is flask-limiter's own: nothing here catches its exceptions.
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
from importlib.metadata import version

import flask
from flask_limiter import Limiter
from redis.backoff import NoBackoff
from redis.retry import Retry

import settings as _settings

S = _settings.load_or_exit()

CALLER_HEADER = S.caller_header
LIMITER_LOGGER = "flask-limiter"
# flask-limiter's own messages (flask_limiter/_extension.py, 4.1.1).
SWALLOWED_MESSAGE = "Failed to rate limit. Swallowing error"


class _Formatter(logging.Formatter):
    """With tracebacks off, an error logged with its exception (Flask's "Exception on /api",
    flask-limiter's "Swallowing error") stays one line, ending with the exception's type and
    message: a traceback is ~5 KB and doubles the CPU an erring request costs."""

    def format(self, record: logging.LogRecord) -> str:
        if S.log_tracebacks or not record.exc_info or record.exc_info[1] is None:
            return super().format(record)
        exc = record.exc_info[1]
        saved = record.exc_info, record.exc_text
        record.exc_info, record.exc_text = None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text = saved
        return f"{line} [{type(exc).__module__}.{type(exc).__qualname__}: {exc}]"


_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(
    _Formatter(f"%(asctime)s %(levelname)s [{S.instance_id}] %(name)s: %(message)s")
)
logging.basicConfig(level=S.log_level, handlers=[_handler])


class _Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_memory = 0
        self.swallowed = 0

    def add(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


COUNTERS = _Counters()


class _SwallowCounter(logging.Filter):
    """Counts flask-limiter's "swallowing error" records: one per request it let through."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == SWALLOWED_MESSAGE:
            COUNTERS.add("swallowed")
        return True


logging.getLogger(LIMITER_LOGGER).addFilter(_SwallowCounter())


def caller() -> str:
    return flask.request.headers.get(CALLER_HEADER, "")


app = flask.Flask(__name__)
app.config.update(
    RATELIMIT_STORAGE_URI=S.storage_uri,
    # Passed by limits to redis.from_url(), and so to every connection of its pool.
    RATELIMIT_STORAGE_OPTIONS={
        "socket_timeout": S.redis_socket_timeout,
        "socket_connect_timeout": S.redis_socket_connect_timeout,
        # Explicit: redis-py 7's Redis() constructor defaults to 3 retries with exponential
        # backoff, while a client made by from_url() (as limits does) gets 0. Set it here
        # so it does not depend on which path builds the client.
        "retry": Retry(NoBackoff(), S.redis_retries),
    },
    RATELIMIT_STRATEGY=S.strategy,
    RATELIMIT_SWALLOW_ERRORS=S.swallow_errors,
    RATELIMIT_IN_MEMORY_FALLBACK_ENABLED=S.in_memory_fallback_enabled,
    RATELIMIT_HEADERS_ENABLED=S.headers_enabled,
)


# Registered before the limiter's own before_request hook, so it runs first: a request with
# no caller is refused before it reaches the limiter (and Redis).
@app.before_request
def require_caller():
    if flask.request.endpoint == "api" and not caller():
        return flask.Response(
            f"missing {CALLER_HEADER} header\n", status=400, mimetype="text/plain"
        )
    return None


limiter = Limiter(caller, app=app, default_limits=[S.limit_string])

_ready = False


@app.get("/healthz")
@limiter.exempt
def healthz():
    global _ready
    if not _ready:
        # RedisStorage.check(): PING, False on any error.
        if not limiter.storage.check():
            return flask.Response("storage not reachable\n", status=503, mimetype="text/plain")
        _ready = True
    return flask.Response("ok\n", status=200, mimetype="text/plain")


@app.get("/api")
def api():
    return flask.Response("ok\n", status=200, mimetype="text/plain")


_was_dead = False


@app.after_request
def observe_fallback(response: flask.Response) -> flask.Response:
    # flask-limiter sets _storage_dead while it decides with its in-memory storage (only
    # with the fallback enabled). It logs the switch to memory at WARNING but the switch
    # back at INFO, which this target does not show (every 429 is logged at INFO), so the
    # target logs both switches itself, as seen by the first request after each.
    global _was_dead
    dead = limiter._storage_dead
    if dead != _was_dead:
        _was_dead = dead
        logging.getLogger("failmode").warning(
            "flask-limiter now limits with %s", "its in-memory storage" if dead else "Redis"
        )
    if dead and flask.request.endpoint == "api":
        COUNTERS.add("in_memory")
    return response


@app.get("/metrics")
@limiter.exempt
def metrics():
    body = (
        "# HELP failmode_fallback_total /api requests decided without Redis.\n"
        "# TYPE failmode_fallback_total counter\n"
        f'failmode_fallback_total{{route="api",reason="in_memory"}} {COUNTERS.in_memory}\n'
        f'failmode_fallback_total{{route="api",reason="swallowed"}} {COUNTERS.swallowed}\n'
        "# HELP failmode_in_memory 1 while flask-limiter limits with its in-memory storage.\n"
        "# TYPE failmode_in_memory gauge\n"
        f"failmode_in_memory {int(bool(limiter._storage_dead))}\n"
    )
    return flask.Response(body, status=200, content_type="text/plain; version=0.0.4")


def _startup_line() -> str:
    pool = limiter.storage.storage.connection_pool
    kw = pool.connection_kwargs
    retry = kw.get("retry")
    versions = " ".join(
        f"{name}={version(name)}"
        for name in ("flask", "flask-limiter", "limits", "redis", "gunicorn", "werkzeug")
    )
    return (
        f"flask-limiter target {S.instance_id} starting: python={platform.python_version()} "
        f"{versions}; limit={S.limit_string!r} strategy={S.strategy} "
        f"key=header:{CALLER_HEADER} swallow_errors={S.swallow_errors} "
        f"in_memory_fallback_enabled={S.in_memory_fallback_enabled} "
        f"headers_enabled={S.headers_enabled}; "
        f"storage={_settings.redacted_url(S.storage_uri)} "
        f"socket_timeout={kw.get('socket_timeout')}s "
        f"socket_connect_timeout={kw.get('socket_connect_timeout')}s "
        f"retries={retry.get_retries() if retry else None} "
        f"health_check_interval={kw.get('health_check_interval', 0)}s "
        f"max_connections={pool.max_connections}; "
        f"gunicorn bind={S.bind}:{S.port} workers={S.workers} worker_class={S.worker_class} "
        f"threads={S.threads} keepalive={S.keepalive}s timeout={S.timeout}s "
        f"graceful_timeout={S.graceful_timeout}s "
        f"backlog={S.backlog} accesslog=off log_level={S.log_level} "
        f"log_tracebacks={S.log_tracebacks}"
    )


print(_startup_line(), file=sys.stderr, flush=True)
