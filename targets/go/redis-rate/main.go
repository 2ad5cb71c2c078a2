// failmode target: go-redis/redis_rate v10 (GCRA, one Lua script per request) on go-redis v9,
// in a plain net/http server. Every setting comes from env (see target.toml); a missing or
// invalid one stops the server at start with exit code 64, one line per problem.
//
// GET /healthz answers 200 (the server listens only once a PING has answered).
// GET /api runs limiter.Allow keyed by the caller header: missing or empty → 400; allowed →
// 200 "ok"; not allowed → 429 with Retry-After; an error from the store → 500, what most
// applications written on redis_rate do (its README's example has no error policy).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

const exitUsage = 64

type settings struct {
	bind, port, redisURL, instanceID, callerHeader string
	instanceCount, limit                           int
	window                                         time.Duration
	dialTimeout, readTimeout, writeTimeout         time.Duration
	maxRetries, poolSize                           int
	poolSizeDefault                                bool
	contextTimeoutEnabled                          bool
	// A Sentinel topology's (the manifest's [start.sentinel_env]); none: FAILMODE_REDIS_URL.
	sentinelAddrs  []string
	sentinelMaster string
}

func readSettings() (settings, []string) {
	var s settings
	var problems []string
	get := func(name string) string {
		v, ok := os.LookupEnv(name)
		if !ok || strings.TrimSpace(v) == "" {
			problems = append(problems, name+" is missing")
			return ""
		}
		return strings.TrimSpace(v)
	}
	intOf := func(name string, min int) int {
		v := get(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			problems = append(problems, fmt.Sprintf("%s=%q: want a whole number >= %d", name, v, min))
			return 0
		}
		return n
	}
	msOf := func(name string) time.Duration {
		return time.Duration(intOf(name, 1)) * time.Millisecond
	}

	// 127.0.0.1 as failmode starts it; 0.0.0.0 only as the container image sets it
	// (targets/go/redis-rate/Dockerfile: docker-compose.yml publishes the port on the host's
	// loopback).
	s.bind = get("FAILMODE_BIND")
	if s.bind != "" && s.bind != "127.0.0.1" && s.bind != "0.0.0.0" {
		problems = append(problems, fmt.Sprintf("FAILMODE_BIND=%q: must be 127.0.0.1 (or 0.0.0.0 inside the container image)", s.bind))
	}
	s.port = get("FAILMODE_PORT")
	if s.port != "" {
		if p, err := strconv.Atoi(s.port); err != nil || p < 1 || p > 65535 {
			problems = append(problems, fmt.Sprintf("FAILMODE_PORT=%q: want a port number", s.port))
		}
	}
	s.redisURL = get("FAILMODE_REDIS_URL")
	if v := strings.TrimSpace(os.Getenv("FAILMODE_REDIS_SENTINELS")); v != "" {
		for _, addr := range strings.Split(v, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(addr)); err != nil {
				problems = append(problems, fmt.Sprintf("FAILMODE_REDIS_SENTINELS: %q: %v", addr, err))
			}
			s.sentinelAddrs = append(s.sentinelAddrs, strings.TrimSpace(addr))
		}
		s.sentinelMaster = get("FAILMODE_REDIS_SENTINEL_MASTER")
	}
	s.instanceID = get("FAILMODE_INSTANCE_ID")
	s.instanceCount = intOf("FAILMODE_INSTANCE_COUNT", 1)
	s.limit = intOf("FAILMODE_LIMIT", 1)
	s.window = msOf("FAILMODE_WINDOW_MS")
	s.callerHeader = get("FAILMODE_CALLER_HEADER")

	s.dialTimeout = msOf("GO_REDIS_DIAL_TIMEOUT_MS")
	s.readTimeout = msOf("GO_REDIS_READ_TIMEOUT_MS")
	s.writeTimeout = msOf("GO_REDIS_WRITE_TIMEOUT_MS")
	s.maxRetries = intOf("GO_REDIS_MAX_RETRIES", -1)
	if v := get("GO_REDIS_POOL_SIZE"); v == "default" {
		s.poolSizeDefault = true
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			problems = append(problems, fmt.Sprintf("GO_REDIS_POOL_SIZE=%q: want \"default\" or a whole number >= 1", v))
		}
		s.poolSize = n
	}
	switch v := get("GO_REDIS_CONTEXT_TIMEOUT_ENABLED"); v {
	case "true":
		s.contextTimeoutEnabled = true
	case "false", "":
	default:
		problems = append(problems, fmt.Sprintf("GO_REDIS_CONTEXT_TIMEOUT_ENABLED=%q: want true or false", v))
	}
	return s, problems
}

func moduleVersions() map[string]string {
	out := map[string]string{"go": runtime.Version(), "go-redis (redis.Version())": redis.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/go-redis/redis_rate/v10" || d.Path == "github.com/redis/go-redis/v9" {
				out[d.Path] = d.Version
			}
		}
	}
	return out
}

func logJSON(prefix string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Printf("%s %v", prefix, v)
		return
	}
	log.Printf("%s %s", prefix, b)
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetOutput(os.Stdout)

	s, problems := readSettings()
	var opt *redis.Options
	if s.redisURL != "" {
		var err error
		opt, err = redis.ParseURL(s.redisURL)
		if err != nil {
			problems = append(problems, fmt.Sprintf("FAILMODE_REDIS_URL=%q: %v", s.redisURL, err))
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "invalid setting:", p)
		}
		os.Exit(exitUsage)
	}

	opt.DialTimeout = s.dialTimeout
	opt.ReadTimeout = s.readTimeout
	opt.WriteTimeout = s.writeTimeout
	opt.MaxRetries = s.maxRetries
	if !s.poolSizeDefault {
		opt.PoolSize = s.poolSize
	}
	opt.ContextTimeoutEnabled = s.contextTimeoutEnabled
	var rdb *redis.Client
	if len(s.sentinelAddrs) > 0 {
		// go-redis's failover client: asks the sentinels for the primary, and again when it
		// loses it, with the same connection settings as the plain client.
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            s.sentinelMaster,
			SentinelAddrs:         s.sentinelAddrs,
			DialTimeout:           opt.DialTimeout,
			ReadTimeout:           opt.ReadTimeout,
			WriteTimeout:          opt.WriteTimeout,
			MaxRetries:            opt.MaxRetries,
			PoolSize:              opt.PoolSize,
			ContextTimeoutEnabled: opt.ContextTimeoutEnabled,
		})
	} else {
		rdb = redis.NewClient(opt)
	}
	eff := rdb.Options() // defaults applied

	limit := redis_rate.Limit{Rate: s.limit, Burst: s.limit, Period: s.window}
	limiter := redis_rate.NewLimiter(rdb)

	logJSON("started", map[string]any{
		"target":         "go-redis-rate",
		"instance":       s.instanceID,
		"instance_count": s.instanceCount,
		"versions":       moduleVersions(),
		"limit":          limit.String(),
		"caller_header":  s.callerHeader,
		"on_store_error": "500",
		"go-redis": map[string]any{
			"addr":                 eff.Addr,
			"sentinels":            s.sentinelAddrs,
			"sentinel_master":      s.sentinelMaster,
			"protocol":             eff.Protocol,
			"dial_timeout":         eff.DialTimeout.String(),
			"dialer_retries":       eff.DialerRetries,
			"read_timeout":         eff.ReadTimeout.String(),
			"write_timeout":        eff.WriteTimeout.String(),
			"max_retries":          eff.MaxRetries,
			"min_retry_backoff":    eff.MinRetryBackoff.String(),
			"max_retry_backoff":    eff.MaxRetryBackoff.String(),
			"pool_size":            eff.PoolSize,
			"pool_timeout":         eff.PoolTimeout.String(),
			"min_idle_conns":       eff.MinIdleConns,
			"context_timeout":      eff.ContextTimeoutEnabled,
			"conn_max_idle_time":   eff.ConnMaxIdleTime.String(),
			"disable_identity":     eff.DisableIdentity,
			"max_concurrent_dials": eff.MaxConcurrentDials,
			"unstable_resp3":       eff.UnstableResp3,
			"failing_timeout_s":    eff.FailingTimeoutSeconds,
			"read_buffer_size":     eff.ReadBufferSize,
			"write_buffer_size":    eff.WriteBufferSize,
			"pipeline_pool_size":   eff.PipelinePoolSize,
			"conn_max_lifetime":    eff.ConnMaxLifetime.String(),
			"identity_suffix":      eff.IdentitySuffix,
			"client_name":          eff.ClientName,
			"db":                   eff.DB,
			"pool_fifo":            eff.PoolFIFO,
			"max_idle_conns":       eff.MaxIdleConns,
			"max_active_conns":     eff.MaxActiveConns,
			"dialer_retry_timeout": eff.DialerRetryTimeout.String(),
			"context_timeout_note": "requests carry no deadline, so this changes nothing here",
			"retries_note":         "MaxRetries -1 disables retries (0 means the default, 3)",
		},
	})

	// Serve only once Redis has answered a PING.
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			log.Printf("redis: PING answered (attempt %d)", attempt)
			break
		}
		log.Printf("redis: PING failed (attempt %d): %v", attempt, err)
		time.Sleep(200 * time.Millisecond)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) {
		caller := r.Header.Get(s.callerHeader)
		if caller == "" {
			http.Error(w, "missing "+s.callerHeader+" header", http.StatusBadRequest)
			return
		}
		res, err := limiter.Allow(r.Context(), caller, limit)
		if err != nil {
			log.Printf("store error: %v", err)
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("X-RateLimit-Remaining", strconv.Itoa(res.Remaining))
		if res.Allowed == 0 {
			secs := int(math.Ceil(res.RetryAfter.Seconds()))
			if secs < 1 {
				secs = 1
			}
			h.Set("Retry-After", strconv.Itoa(secs))
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
			return
		}
		h.Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})

	addr := net.JoinHostPort(s.bind, s.port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Printf("listen %s: %v", addr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-stop
		log.Printf("%v: shutting down", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()

	log.Printf("ready: listening on http://%s", addr)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("serve: %v", err)
		os.Exit(1)
	}
	_ = rdb.Close()
}
