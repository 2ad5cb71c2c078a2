package failmode.gateway;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import io.lettuce.core.ClientOptions;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import reactor.core.publisher.Mono;

import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.data.redis.autoconfigure.LettuceClientOptionsBuilderCustomizer;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.route.RouteLocator;
import org.springframework.cloud.gateway.route.builder.RouteLocatorBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerResponse;
import org.springframework.web.server.WebFilter;

/**
 * The gateway: one route, {@code /api}, through {@code RequestRateLimiter} with a
 * {@link RedisRateLimiter}, forwarded to {@code /backend}, a handler in the same app that
 * answers 200 {@code ok}. What the limiter does when Redis fails is the library's own
 * (RedisRateLimiter lets the request through); nothing here changes it.
 */
@SpringBootApplication(proxyBeanMethods = false)
public class GatewayApp {

	static final String ROUTE_ID = "api";

	private static final Log log = LogFactory.getLog(GatewayApp.class);

	/** The one setting of the Redis client that Spring Boot has no property for. */
	@Bean
	LettuceClientOptionsBuilderCustomizer disconnectedBehavior(Settings settings) {
		return (ClientOptions.Builder builder) -> builder.disconnectedBehavior(settings.disconnectedBehavior());
	}

	/**
	 * "limit L per window of W seconds" as a token bucket: a request costs W tokens, the
	 * bucket holds L x W (L requests at once) and refills L tokens a second (L requests per
	 * W seconds). Declaring it makes Spring Cloud Gateway's own (unconfigured) one back off.
	 */
	@Bean
	RedisRateLimiter redisRateLimiter(Settings settings) {
		return new RedisRateLimiter(settings.replenishRate(), settings.burstCapacity(), settings.requestedTokens());
	}

	/** The caller's key: the caller header; missing or blank is an empty key (denied). */
	@Bean
	KeyResolver callerKeyResolver(Settings settings) {
		String header = settings.callerHeader();
		return exchange -> {
			String caller = exchange.getRequest().getHeaders().getFirst(header);
			return (caller == null || caller.isBlank()) ? Mono.empty() : Mono.just(caller);
		};
	}

	@Bean
	RouteLocator routes(RouteLocatorBuilder builder, RedisRateLimiter limiter, KeyResolver callerKeyResolver,
			Settings settings) {
		return builder.routes()
			.route(ROUTE_ID,
					r -> r.path("/api")
						.filters(f -> f.requestRateLimiter(c -> c.setRateLimiter(limiter)
							.setKeyResolver(callerKeyResolver)
							.setDenyEmptyKey(settings.denyEmptyKey())
							.setEmptyKeyStatus(settings.emptyKeyStatus().name())))
						.uri("forward:/backend"))
			.build();
	}

	@Bean
	Readiness readiness(ReactiveStringRedisTemplate redis) {
		return new Readiness(redis);
	}

	@Bean
	FallbackCounter fallbackCounter() {
		return new FallbackCounter();
	}

	/**
	 * Counts the /api requests RedisRateLimiter let through because Redis failed: on an error
	 * it answers "allowed" with {@code X-RateLimit-Remaining: -1}, a value the Lua script never
	 * returns. Read when the response is committed, after the gateway filter set its headers.
	 */
	@Bean
	WebFilter fallbackCountingFilter(FallbackCounter counter) {
		return (exchange, chain) -> {
			if ("/api".equals(exchange.getRequest().getPath().value())) {
				exchange.getResponse().beforeCommit(() -> {
					if ("-1".equals(exchange.getResponse().getHeaders().getFirst(RedisRateLimiter.REMAINING_HEADER))) {
						counter.storeError.incrementAndGet();
					}
					return Mono.empty();
				});
			}
			return chain.filter(exchange);
		};
	}

	/**
	 * /healthz, /metrics and the handler behind the gateway route. Functional endpoints are
	 * mapped before the gateway's routes, so /api is left to the gateway.
	 */
	@Bean
	RouterFunction<ServerResponse> endpoints(Readiness readiness, FallbackCounter counter) {
		return RouterFunctions.route()
			.GET("/backend", req -> ServerResponse.ok().contentType(MediaType.TEXT_PLAIN).bodyValue("ok"))
			.GET("/healthz", req -> readiness.check()
				.flatMap(ready -> ready ? ServerResponse.ok().contentType(MediaType.TEXT_PLAIN).bodyValue("ok\n")
						: ServerResponse.status(HttpStatus.SERVICE_UNAVAILABLE)
							.contentType(MediaType.TEXT_PLAIN)
							.bodyValue("redis has not answered a PING yet\n")))
			.GET("/metrics",
					req -> ServerResponse.ok()
						.contentType(MediaType.parseMediaType("text/plain; version=0.0.4; charset=utf-8"))
						.bodyValue(counter.exposition()))
			.build();
	}

	/** 503 until a Redis PING has answered once, then 200 for good (a readiness latch). */
	static final class Readiness {

		private final ReactiveStringRedisTemplate redis;

		private final AtomicBoolean ready = new AtomicBoolean();

		private final AtomicLong lastWarning = new AtomicLong();

		Readiness(ReactiveStringRedisTemplate redis) {
			this.redis = redis;
		}

		Mono<Boolean> check() {
			if (ready.get()) {
				return Mono.just(true);
			}
			return redis.execute(conn -> conn.ping())
				.next()
				.timeout(Duration.ofSeconds(1))
				.map(pong -> {
					if (ready.compareAndSet(false, true)) {
						log.info("redis: PING answered " + pong + "; /healthz answers 200 from now on");
					}
					return true;
				})
				.onErrorResume(e -> {
					// The harness probes every 25 ms: one line a second at most.
					long now = System.nanoTime();
					long last = lastWarning.get();
					if ((last == 0 || now - last >= 1_000_000_000L) && lastWarning.compareAndSet(last, now)) {
						log.warn("redis: PING failed: " + e + " (" + NestedExceptionUtils.getMostSpecificCause(e) + ")");
					}
					return Mono.just(false);
				})
				.defaultIfEmpty(false);
		}

	}

	/** failmode's reading, not the library's: /api requests let through on a Redis error. */
	static final class FallbackCounter {

		final AtomicLong storeError = new AtomicLong();

		String exposition() {
			return "# HELP failmode_fallback_total /api requests decided without Redis: RedisRateLimiter "
					+ "let them through on a Redis error (X-RateLimit-Remaining: -1).\n"
					+ "# TYPE failmode_fallback_total counter\n"
					+ "failmode_fallback_total{route=\"api\",reason=\"store_error\"} " + storeError.get() + "\n";
		}

	}

}
