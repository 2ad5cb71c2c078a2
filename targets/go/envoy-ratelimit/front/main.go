// failmode-envoy-front: a small HTTP server that does what Envoy's HTTP rate limit filter
// (envoy.filters.http.ratelimit) does, in front of envoyproxy/ratelimit, which it starts as its
// own child process.
//
// Per request to /api it calls envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
// with domain "failmode" and one descriptor entry caller=<caller header>, over one gRPC
// connection per front, with Envoy's filter semantics:
//
//	OVER_LIMIT           -> 429 (with x-envoy-ratelimited: true, as Envoy)
//	OK                   -> 200 "ok"
//	error or timeout     -> failure_mode_deny false (Envoy's default): 200, the request passes
//	                        failure_mode_deny true: status_on_error (Envoy's default 500)
//
// Every setting comes from the environment; a missing or invalid one exits with code 64.
// See ../README.md.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const exitBadSetting = 64

const domain = "failmode"

type settings struct {
	Bind, CallerHeader, RedisAddr, InstanceID, Bin, LogLevel string
	// "<master name>,<sentinel>,..." in a Sentinel topology; empty: RedisAddr alone.
	SentinelURL                                           string
	Port, Limit, StatusOnError, LocalCacheBytes, PoolSize int
	WindowMs                                              int64
	Unit                                                  string
	Timeout, RedisTimeout                                 time.Duration
	FailureModeDeny                                       bool
}

func bad(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "failmode-envoy-front: bad setting: "+format+"\n", a...)
	os.Exit(exitBadSetting)
}

func need(name string) string {
	v, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(v) == "" {
		bad("%s is missing", name)
	}
	return strings.TrimSpace(v)
}

func needInt(name string, min, max int64) int64 {
	v := need(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		bad("%s=%q: want an integer in [%d, %d]", name, v, min, max)
	}
	return n
}

func needBool(name string) bool {
	switch v := need(name); v {
	case "true":
		return true
	case "false":
		return false
	default:
		bad("%s=%q: want true or false", name, v)
	}
	return false
}

func needDuration(name string) time.Duration {
	v := need(name)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		bad("%s=%q: want a positive Go duration (e.g. 20ms)", name, v)
	}
	return d
}

func load() settings {
	var s settings
	s.Bind = need("FAILMODE_BIND")
	if ip := net.ParseIP(s.Bind); ip == nil {
		bad("FAILMODE_BIND=%q: want an IP address", s.Bind)
	}
	s.Port = int(needInt("FAILMODE_PORT", 1, 65535))
	ru := need("FAILMODE_REDIS_URL")
	u, err := url.Parse(ru)
	if err != nil || u.Scheme != "redis" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/" && u.Path != "/0") || u.User != nil {
		bad("FAILMODE_REDIS_URL=%q: want redis://host:port (no auth, db 0)", ru)
	}
	s.RedisAddr = u.Host
	// A Sentinel topology's (the manifest's [start.sentinel_env]): the service's own
	// REDIS_TYPE=SENTINEL, REDIS_URL=<master name>,<sentinel>,...
	if v := strings.TrimSpace(os.Getenv("FAILMODE_REDIS_SENTINELS")); v != "" {
		for _, addr := range strings.Split(v, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(addr)); err != nil {
				bad("FAILMODE_REDIS_SENTINELS: %q: %v", addr, err)
			}
		}
		s.SentinelURL = need("FAILMODE_REDIS_SENTINEL_MASTER") + "," + v
	}
	s.InstanceID = need("FAILMODE_INSTANCE_ID")
	s.Limit = int(needInt("FAILMODE_LIMIT", 1, 1<<32-1))
	s.WindowMs = needInt("FAILMODE_WINDOW_MS", 1, 1<<62)
	// envoyproxy/ratelimit has fixed windows of one unit only.
	switch s.WindowMs {
	case 1000:
		s.Unit = "second"
	case 60_000:
		s.Unit = "minute"
	case 3_600_000:
		s.Unit = "hour"
	case 86_400_000:
		s.Unit = "day"
	default:
		bad("FAILMODE_WINDOW_MS=%d: envoyproxy/ratelimit only has windows of 1 second, minute, hour or day (1000, 60000, 3600000, 86400000)", s.WindowMs)
	}
	s.CallerHeader = strings.ToLower(need("FAILMODE_CALLER_HEADER"))
	s.Bin = need("ERL_BIN")
	s.Timeout = needDuration("ERL_TIMEOUT")
	s.FailureModeDeny = needBool("ERL_FAILURE_MODE_DENY")
	s.StatusOnError = int(needInt("ERL_STATUS_ON_ERROR", 200, 599))
	s.LocalCacheBytes = int(needInt("ERL_LOCAL_CACHE_SIZE_IN_BYTES", 0, 1<<40))
	s.PoolSize = int(needInt("ERL_REDIS_POOL_SIZE", 1, 10000))
	s.RedisTimeout = needDuration("ERL_REDIS_TIMEOUT")
	s.LogLevel = need("ERL_LOG_LEVEL")
	return s
}

// freePorts picks n distinct free loopback ports: every listener stays open until all n are
// chosen, or the kernel may hand the same port out twice (it did: the service's gRPC and
// HTTP ports once came out equal, and it never became ready).
func freePorts(n int) []int {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintf(os.Stderr, "failmode-envoy-front: no free port: %v\n", err)
			os.Exit(1)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func main() {
	s := load()
	if _, err := os.Stat(s.Bin); err != nil {
		bad("ERL_BIN=%q: %v (run targets/go/envoy-ratelimit/build.sh)", s.Bin, err)
	}

	// Per-instance runtime directory: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/failmode.yaml.
	root, err := os.MkdirTemp("", "failmode-envoy-ratelimit-"+s.InstanceID+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(root)
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: %v\n", err)
		os.Exit(1)
	}
	yaml := fmt.Sprintf("domain: %s\ndescriptors:\n  - key: caller\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n", domain, s.Unit, s.Limit)
	if err := os.WriteFile(filepath.Join(cfgDir, "failmode.yaml"), []byte(yaml), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: %v\n", err)
		os.Exit(1)
	}

	ports := freePorts(3)
	grpcPort, httpPort, debugPort := ports[0], ports[1], ports[2]
	redisType, redisURL := "REDIS_TYPE=SINGLE", s.RedisAddr
	if s.SentinelURL != "" {
		redisType, redisURL = "REDIS_TYPE=SENTINEL", s.SentinelURL
	}
	// The service's whole environment: nothing inherited, so these are all of its settings
	// (everything else is the service's default).
	childEnv := []string{
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(httpPort),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(debugPort),
		"USE_STATSD=false",
		"DISABLE_STATS=true", // null sink: no stats lines flushed to stdout every 10 s
		"LOG_LEVEL=" + s.LogLevel,
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false",
		"BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp",
		redisType,
		"REDIS_URL=" + redisURL,
		"REDIS_POOL_SIZE=" + strconv.Itoa(s.PoolSize),
		"REDIS_TIMEOUT=" + s.RedisTimeout.String(),
		"LOCAL_CACHE_SIZE_IN_BYTES=" + strconv.Itoa(s.LocalCacheBytes),
	}
	startLine, _ := json.Marshal(map[string]any{
		"msg": "failmode-envoy-front starting", "instance": s.InstanceID,
		"listen": fmt.Sprintf("%s:%d", s.Bind, s.Port), "limit": s.Limit, "unit": s.Unit,
		"timeout": s.Timeout.String(), "failure_mode_deny": s.FailureModeDeny,
		"status_on_error": s.StatusOnError, "service": s.Bin, "service_env": childEnv,
	})
	fmt.Fprintln(os.Stderr, string(startLine))

	// Start the service from a goroutine locked to its OS thread, so Pdeathsig (sent when the
	// creating thread exits) fires only when the front itself dies, even by SIGKILL.
	// The child stays in the front's process group.
	cmd := exec.Command(s.Bin)
	cmd.Env = childEnv
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the child
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: cannot start %s: %v\n", s.Bin, err)
		os.Exit(1)
	}

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = cmd.Process.Kill()
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: grpc client: %v\n", err)
		os.Exit(1)
	}
	client := rlsv3.NewRateLimitServiceClient(conn)

	var ready atomic.Bool
	var nOK, nOver, nErr atomic.Int64
	go func() { // ready once the service's /healthcheck answers 200 and one ShouldRateLimit succeeded
		hc := &http.Client{Timeout: 500 * time.Millisecond}
		for {
			time.Sleep(50 * time.Millisecond)
			resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/healthcheck", httpPort))
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			r, err := client.ShouldRateLimit(ctx, request("__failmode_readiness__"))
			cancel()
			if err == nil && r.GetOverallCode() == rlsv3.RateLimitResponse_OK {
				ready.Store(true)
				fmt.Fprintf(os.Stderr, "{\"msg\":\"ratelimit service ready\",\"instance\":%q,\"grpc_port\":%d}\n", s.InstanceID, grpcPort)
				return
			}
		}
	}()

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if ready.Load() {
			w.WriteHeader(200)
			_, _ = w.Write([]byte("ok"))
			return
		}
		w.WriteHeader(503)
		_, _ = w.Write([]byte("starting"))
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE failmode_envoy_front_decisions_total counter\n")
		fmt.Fprintf(w, "failmode_envoy_front_decisions_total{result=\"ok\"} %d\n", nOK.Load())
		fmt.Fprintf(w, "failmode_envoy_front_decisions_total{result=\"over_limit\"} %d\n", nOver.Load())
		fmt.Fprintf(w, "failmode_envoy_front_decisions_total{result=\"error\"} %d\n", nErr.Load())
	})
	mux.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) {
		caller := r.Header.Get(s.CallerHeader)
		if caller == "" {
			http.Error(w, "missing "+s.CallerHeader, http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.Timeout)
		resp, err := client.ShouldRateLimit(ctx, request(caller))
		cancel()
		switch {
		case err != nil:
			nErr.Add(1)
			if s.FailureModeDeny {
				w.WriteHeader(s.StatusOnError)
				_, _ = w.Write([]byte("rate limit service error\n"))
				return
			}
			_, _ = w.Write([]byte("ok"))
		case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
			nOver.Add(1)
			w.Header().Set("x-envoy-ratelimited", "true")
			w.WriteHeader(http.StatusTooManyRequests)
		default: // OK (and UNKNOWN, which Envoy also lets through)
			nOK.Add(1)
			_, _ = w.Write([]byte("ok"))
		}
	})

	srv := &http.Server{Addr: net.JoinHostPort(s.Bind, strconv.Itoa(s.Port)), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		_ = cmd.Process.Kill()
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: listen %s: %v\n", srv.Addr, err)
		os.Exit(1)
	}
	go func() { _ = srv.Serve(ln) }()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	code := 0
	select {
	case got := <-sig:
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: %v, stopping the ratelimit service (pid %d)\n", got, cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	case err := <-exited:
		// The service died on its own (it panics at start when Redis is unreachable): no
		// limiter any more, so the front stops too rather than pretend.
		fmt.Fprintf(os.Stderr, "failmode-envoy-front: ratelimit service exited: %v\n", err)
		code = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = srv.Shutdown(ctx)
	cancel()
	_ = conn.Close()
	_ = os.RemoveAll(root)
	os.Exit(code)
}

func request(caller string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{
		Domain: domain,
		Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
			Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "caller", Value: caller}},
		}},
		HitsAddend: 1,
	}
}
