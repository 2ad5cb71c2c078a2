// failmode target: Traefik's rateLimit middleware with its Redis store (pkg/middlewares/ratelimiter
// of github.com/traefik/traefik/v3: a token bucket in one Lua script per request, on go-redis
// v9), constructed from the dynamic configuration Traefik would parse, in a plain net/http
// server. Every setting comes from env (see target.toml); a missing or invalid one stops the
// server at start with exit code 64, one line per problem.
//
// GET /healthz answers 200 (the server listens only once a PING has answered).
// GET /api: missing or empty caller header → 400 (in front of the middleware: Traefik would put
// every such request in one bucket named after the empty header); otherwise the middleware
// decides: 200 "ok" from the handler behind it, 429 with Retry-After when the bucket is empty,
// and 500 "Could not insert/update bucket" when the store errs (ratelimiter.ServeHTTP: Traefik
// has no setting to change that).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
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

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	ptypes "github.com/traefik/paerser/types"
	"github.com/traefik/traefik/v3/pkg/config/dynamic"
	"github.com/traefik/traefik/v3/pkg/middlewares/ratelimiter"
)

const exitUsage = 64

// The middleware's name, as Traefik's file provider would name a middleware `ratelimit` in its
// dynamic configuration: the Redis keys are "rate:" + name + ":" + caller.
const middlewareName = "ratelimit@file"

type settings struct {
	bind, port, redisURL, instanceID, callerHeader string
	instanceCount, limit                           int
	window                                         time.Duration
	dialTimeout, readTimeout, writeTimeout         time.Duration
	poolSize                                       int
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

	// 127.0.0.1 as failmode starts it; 0.0.0.0 only inside a container image.
	s.bind = get("FAILMODE_BIND")
	if s.bind != "" && s.bind != "127.0.0.1" && s.bind != "0.0.0.0" {
		problems = append(problems, fmt.Sprintf("FAILMODE_BIND=%q: must be 127.0.0.1 (or 0.0.0.0 inside a container image)", s.bind))
	}
	s.port = get("FAILMODE_PORT")
	if s.port != "" {
		if p, err := strconv.Atoi(s.port); err != nil || p < 1 || p > 65535 {
			problems = append(problems, fmt.Sprintf("FAILMODE_PORT=%q: want a port number", s.port))
		}
	}
	s.redisURL = get("FAILMODE_REDIS_URL")
	s.instanceID = get("FAILMODE_INSTANCE_ID")
	s.instanceCount = intOf("FAILMODE_INSTANCE_COUNT", 1)
	s.limit = intOf("FAILMODE_LIMIT", 1)
	s.window = msOf("FAILMODE_WINDOW_MS")
	s.callerHeader = get("FAILMODE_CALLER_HEADER")

	s.dialTimeout = msOf("TRAEFIK_REDIS_DIAL_TIMEOUT_MS")
	s.readTimeout = msOf("TRAEFIK_REDIS_READ_TIMEOUT_MS")
	s.writeTimeout = msOf("TRAEFIK_REDIS_WRITE_TIMEOUT_MS")
	// 0 is Traefik's default: go-redis's 10 x GOMAXPROCS.
	s.poolSize = intOf("TRAEFIK_REDIS_POOL_SIZE", 0)
	return s, problems
}

func moduleVersions() map[string]string {
	out := map[string]string{"go": runtime.Version(), "go-redis (redis.Version())": redis.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			switch d.Path {
			case "github.com/traefik/traefik/v3", "github.com/redis/go-redis/v9", "golang.org/x/time", "github.com/traefik/paerser":
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

func durationOf(d time.Duration) *ptypes.Duration {
	p := ptypes.Duration(d)
	return &p
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetOutput(os.Stdout)

	s, problems := readSettings()
	var url *redis.Options
	if s.redisURL != "" {
		var err error
		url, err = redis.ParseURL(s.redisURL)
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

	// The dynamic configuration, as Traefik's file provider builds it from
	//   http.middlewares.ratelimit.rateLimit:
	//     average: LIMIT, period: WINDOW, burst: LIMIT,
	//     sourceCriterion: {requestHeaderName: CALLER_HEADER},
	//     redis: {endpoints: [HOST:PORT], readTimeout, writeTimeout, dialTimeout[, poolSize]}
	// (its parser calls SetDefaults on each section it creates, then applies the given fields).
	cfg := dynamic.RateLimit{}
	cfg.SetDefaults() // burst 1, period 1s
	cfg.Average = int64(s.limit)
	cfg.Period = ptypes.Duration(s.window)
	cfg.Burst = int64(s.limit)
	cfg.SourceCriterion = &dynamic.SourceCriterion{RequestHeaderName: s.callerHeader}
	cfg.Redis = &dynamic.Redis{}
	cfg.Redis.SetDefaults() // endpoints localhost:6379, read/write 3s, dial 5s
	cfg.Redis.Endpoints = []string{url.Addr}
	cfg.Redis.Username = url.Username
	cfg.Redis.Password = url.Password
	cfg.Redis.DB = url.DB
	cfg.Redis.PoolSize = s.poolSize
	cfg.Redis.ReadTimeout = durationOf(s.readTimeout)
	cfg.Redis.WriteTimeout = durationOf(s.writeTimeout)
	cfg.Redis.DialTimeout = durationOf(s.dialTimeout)

	// Traefik's own logger, at its default level (ERROR), on stdout: the middleware logs every
	// store error there ("Could not insert/update bucket").
	logger := zerolog.New(os.Stdout).Level(zerolog.ErrorLevel).With().Timestamp().Logger()
	ctx := logger.WithContext(context.Background())

	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	limited, err := ratelimiter.New(ctx, ok, cfg, middlewareName)
	if err != nil {
		log.Printf("ratelimiter.New: %v", err)
		os.Exit(exitUsage)
	}

	// The go-redis options the middleware builds (ratelimiter.newRedisLimiter: UniversalOptions
	// from cfg.Redis, everything else go-redis's default), for the startup PING and to print
	// the effective values. The middleware's own client is unexported; this one is closed once
	// the PING has answered.
	probe := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:          cfg.Redis.Endpoints,
		Username:       cfg.Redis.Username,
		Password:       cfg.Redis.Password,
		DB:             cfg.Redis.DB,
		PoolSize:       cfg.Redis.PoolSize,
		MinIdleConns:   cfg.Redis.MinIdleConns,
		MaxActiveConns: cfg.Redis.MaxActiveConns,
		DialTimeout:    time.Duration(*cfg.Redis.DialTimeout),
		ReadTimeout:    time.Duration(*cfg.Redis.ReadTimeout),
		WriteTimeout:   time.Duration(*cfg.Redis.WriteTimeout),
	})
	var eff *redis.Options
	if c, isClient := probe.(*redis.Client); isClient {
		eff = c.Options()
	}

	shown := cfg
	shownRedis := *cfg.Redis
	if shownRedis.Password != "" {
		shownRedis.Password = "***"
	}
	shown.Redis = &shownRedis
	started := map[string]any{
		"target":         "traefik-ratelimit",
		"instance":       s.instanceID,
		"instance_count": s.instanceCount,
		"versions":       moduleVersions(),
		"middleware":     middlewareName,
		"rateLimit":      shown,
		"caller_header":  s.callerHeader,
		"on_store_error": "500 (Traefik's ratelimiter: \"Could not insert/update bucket\")",
	}
	if eff != nil {
		started["go-redis"] = map[string]any{
			"addr":               eff.Addr,
			"protocol":           eff.Protocol,
			"protocol_note":      "0: RESP3 (HELLO 3), go-redis's default",
			"dial_timeout":       eff.DialTimeout.String(),
			"read_timeout":       eff.ReadTimeout.String(),
			"write_timeout":      eff.WriteTimeout.String(),
			"max_retries":        eff.MaxRetries,
			"min_retry_backoff":  eff.MinRetryBackoff.String(),
			"max_retry_backoff":  eff.MaxRetryBackoff.String(),
			"pool_size":          eff.PoolSize,
			"pool_timeout":       eff.PoolTimeout.String(),
			"min_idle_conns":     eff.MinIdleConns,
			"max_active_conns":   eff.MaxActiveConns,
			"context_timeout":    eff.ContextTimeoutEnabled,
			"conn_max_idle_time": eff.ConnMaxIdleTime.String(),
			"retries_note":       "Traefik sets no MaxRetries: go-redis's default, 3 retries (a timed-out read is retried too)",
		}
	}
	logJSON("started", started)

	// Serve only once Redis has answered a PING.
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := probe.Ping(pctx).Err()
		cancel()
		if err == nil {
			log.Printf("redis: PING answered (attempt %d)", attempt)
			break
		}
		log.Printf("redis: PING failed (attempt %d): %v", attempt, err)
		time.Sleep(200 * time.Millisecond)
	}
	_ = probe.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(s.callerHeader) == "" {
			http.Error(w, "missing "+s.callerHeader+" header", http.StatusBadRequest)
			return
		}
		limited.ServeHTTP(w, r)
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
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	log.Printf("ready: listening on http://%s", addr)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("serve: %v", err)
		os.Exit(1)
	}
}
