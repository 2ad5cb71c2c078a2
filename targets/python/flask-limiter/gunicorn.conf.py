# gunicorn's configuration for the flask-limiter target, from the environment the manifest
# sets (see settings.py). Run as:
#   .tools/python/bin/gunicorn --config targets/python/flask-limiter/gunicorn.conf.py
# gunicorn loads this file in its arbiter, before forking: a missing or invalid setting
# ends the process here with exit code 64.

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

import settings as _settings  # noqa: E402

_s = _settings.load_or_exit()

wsgi_app = "app:app"
pythonpath = _here
bind = [f"{_s.bind}:{_s.port}"]
# One worker process per instance: flask-limiter's in-memory fallback (and its recovery
# check) is per process, so it is per instance here.
workers = _s.workers
worker_class = _s.worker_class
# Threads, so that requests waiting on a slow Redis do not queue behind each other.
threads = _s.threads
keepalive = _s.keepalive
timeout = _s.timeout
graceful_timeout = _s.graceful_timeout
backlog = _s.backlog
# No access log (it costs CPU on every request); gunicorn's error log on stderr.
accesslog = None
errorlog = "-"
loglevel = _s.log_level.lower()
# gunicorn >= 25 opens a control socket at $XDG_RUNTIME_DIR/gunicorn.ctl or
# ~/.gunicorn/gunicorn.ctl by default: one path shared by every instance on the machine.
control_socket_disable = True
proc_name = f"failmode-flask-limiter-{_s.instance_id}"
preload_app = False
