package failmode.gateway;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.lettuce.core.ClientOptions.DisconnectedBehavior;

import org.springframework.http.HttpStatus;

/**
 * Every setting the target reads, all from the environment (the manifest's [start.env]).
 * {@link #read} collects every problem instead of stopping at the first; the caller prints one
 * line per problem and exits with code 64.
 */
record Settings(String bind, int port, String redisUrl, String instanceId, int instanceCount,
		int limit, long windowMs, String callerHeader, boolean denyEmptyKey, HttpStatus emptyKeyStatus,
		long commandTimeoutMs, long connectTimeoutMs, DisconnectedBehavior disconnectedBehavior,
		boolean logStackTraces) {

	/** RedisRateLimiter's replenishRate: tokens added per second. */
	int replenishRate() {
		return limit;
	}

	/** RedisRateLimiter's requestedTokens: what one request costs, the window in seconds. */
	int requestedTokens() {
		return (int) (windowMs / 1000);
	}

	/** RedisRateLimiter's burstCapacity: the bucket holds `limit` requests. */
	long burstCapacity() {
		return (long) limit * requestedTokens();
	}

	static final class Invalid extends Exception {

		final List<String> problems;

		Invalid(List<String> problems) {
			super(String.join("; ", problems));
			this.problems = problems;
		}

	}

	static Settings read(Map<String, String> env) throws Invalid {
		List<String> problems = new ArrayList<>();
		Reader r = new Reader(env, problems);

		// 127.0.0.1 as failmode starts it; 0.0.0.0 only as the container image sets it
		// (targets/java/spring-cloud-gateway/Dockerfile: docker-compose.yml publishes the port
		// on the host's loopback).
		String bind = r.text("FAILMODE_BIND");
		if (bind != null && !bind.equals("127.0.0.1") && !bind.equals("0.0.0.0")) {
			problems.add("FAILMODE_BIND=\"" + bind + "\": must be 127.0.0.1 (or 0.0.0.0 inside the container image)");
		}
		long port = r.whole("FAILMODE_PORT", 1, 65535);
		String redisUrl = r.text("FAILMODE_REDIS_URL");
		if (redisUrl != null) {
			try {
				URI u = URI.create(redisUrl);
				if (!"redis".equals(u.getScheme()) || u.getHost() == null || u.getPort() < 1) {
					problems.add("FAILMODE_REDIS_URL=\"" + redisUrl + "\": want redis://HOST:PORT");
				}
			}
			catch (IllegalArgumentException e) {
				problems.add("FAILMODE_REDIS_URL=\"" + redisUrl + "\": " + e.getMessage());
			}
		}
		String instanceId = r.text("FAILMODE_INSTANCE_ID");
		long instanceCount = r.whole("FAILMODE_INSTANCE_COUNT", 1, Integer.MAX_VALUE);
		// replenishRate is an int in RedisRateLimiter.Config.
		long limit = r.whole("FAILMODE_LIMIT", 1, Integer.MAX_VALUE);
		long windowMs = r.whole("FAILMODE_WINDOW_MS", 1, 1000L * Integer.MAX_VALUE);
		if (windowMs > 0 && windowMs % 1000 != 0) {
			// The Lua script reads Redis's clock in whole seconds (TIME[1]) and the rate is
			// whole tokens per second: there is no way to say a sub-second window.
			problems.add("FAILMODE_WINDOW_MS=\"" + windowMs
					+ "\": RedisRateLimiter counts whole seconds; want a multiple of 1000");
		}
		if (limit > 0 && windowMs >= 1000 && limit * (windowMs / 1000) > 9007199254740991L) {
			problems.add("FAILMODE_LIMIT x window in seconds is over RedisRateLimiter's burstCapacity maximum (2^53 - 1)");
		}
		String callerHeader = r.text("FAILMODE_CALLER_HEADER");
		if (callerHeader != null && !callerHeader.matches("[A-Za-z0-9-]+")) {
			problems.add("FAILMODE_CALLER_HEADER=\"" + callerHeader + "\": want a header name (letters, digits, -)");
		}
		Boolean denyEmptyKey = r.bool("SCG_DENY_EMPTY_KEY");
		HttpStatus emptyKeyStatus = null;
		String status = r.text("SCG_EMPTY_KEY_STATUS");
		if (status != null) {
			try {
				emptyKeyStatus = status.matches("[0-9]{3}") ? HttpStatus.valueOf(Integer.parseInt(status))
						: HttpStatus.valueOf(status);
			}
			catch (IllegalArgumentException e) {
				problems.add("SCG_EMPTY_KEY_STATUS=\"" + status + "\": want an HTTP status name or code, e.g. BAD_REQUEST");
			}
		}
		long commandTimeoutMs = r.whole("LETTUCE_COMMAND_TIMEOUT_MS", 1, 3_600_000);
		long connectTimeoutMs = r.whole("LETTUCE_CONNECT_TIMEOUT_MS", 1, 3_600_000);
		DisconnectedBehavior disconnected = null;
		String behavior = r.text("LETTUCE_DISCONNECTED_BEHAVIOR");
		if (behavior != null) {
			try {
				disconnected = DisconnectedBehavior.valueOf(behavior);
			}
			catch (IllegalArgumentException e) {
				problems.add("LETTUCE_DISCONNECTED_BEHAVIOR=\"" + behavior
						+ "\": want DEFAULT, ACCEPT_COMMANDS or REJECT_COMMANDS");
			}
		}

		Boolean logStackTraces = r.bool("FAILMODE_LOG_STACK_TRACES");

		if (!problems.isEmpty()) {
			throw new Invalid(problems);
		}
		return new Settings(bind, (int) port, redisUrl, instanceId, (int) instanceCount, (int) limit, windowMs,
				callerHeader, denyEmptyKey, emptyKeyStatus, commandTimeoutMs, connectTimeoutMs, disconnected,
				logStackTraces);
	}

	private record Reader(Map<String, String> env, List<String> problems) {

		String text(String name) {
			String v = env.get(name);
			if (v == null || v.isBlank()) {
				problems.add(name + " is missing");
				return null;
			}
			return v.strip();
		}

		long whole(String name, long min, long max) {
			String v = text(name);
			if (v == null) {
				return 0;
			}
			try {
				long n = Long.parseLong(v);
				if (n >= min && n <= max) {
					return n;
				}
			}
			catch (NumberFormatException e) {
				// reported below
			}
			problems.add(name + "=\"" + v + "\": want a whole number from " + min + " to " + max);
			return 0;
		}

		Boolean bool(String name) {
			String v = text(name);
			if (v == null) {
				return false;
			}
			if (v.equals("true") || v.equals("false")) {
				return Boolean.valueOf(v);
			}
			problems.add(name + "=\"" + v + "\": want true or false");
			return false;
		}

	}

}
