package failmode.gateway;

import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.resource.ClientResources;

import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.context.ApplicationListener;
import org.springframework.core.SpringVersion;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.stereotype.Component;

/**
 * One line on stderr once the app is up: the versions and the effective settings, read back
 * from the objects built (so Lettuce's and Spring's defaults show as they are).
 */
@Component
class StartupLine implements ApplicationListener<ApplicationReadyEvent> {

	private final Settings settings;

	private final LettuceConnectionFactory factory;

	private final RedisRateLimiter limiter;

	StartupLine(Settings settings, LettuceConnectionFactory factory, RedisRateLimiter limiter) {
		this.settings = settings;
		this.factory = factory;
		this.limiter = limiter;
	}

	private static String version(Class<?> c) {
		String v = c.getPackage().getImplementationVersion();
		return v == null ? "?" : v;
	}

	@Override
	public void onApplicationEvent(ApplicationReadyEvent event) {
		Map<String, Object> line = new LinkedHashMap<>();
		line.put("target", "spring-cloud-gateway");
		line.put("instance", settings.instanceId());
		line.put("instance_count", settings.instanceCount());
		line.put("listen", settings.bind() + ":" + settings.port());

		Map<String, Object> versions = new LinkedHashMap<>();
		versions.put("spring-boot", SpringBootVersion.getVersion());
		versions.put("spring-cloud-gateway", version(RedisRateLimiter.class));
		versions.put("spring-framework", SpringVersion.getVersion());
		versions.put("spring-data-redis", version(LettuceConnectionFactory.class));
		versions.put("lettuce", version(RedisClient.class));
		versions.put("reactor-netty", version(reactor.netty.http.server.HttpServer.class));
		versions.put("netty", version(io.netty.channel.Channel.class));
		versions.put("java", System.getProperty("java.vm.name") + " " + Runtime.version());
		line.put("versions", versions);

		Map<String, Object> rate = new LinkedHashMap<>();
		rate.put("limit", settings.limit() + " per " + settings.windowMs() + " ms");
		rate.put("replenishRate", settings.replenishRate());
		rate.put("burstCapacity", settings.burstCapacity());
		rate.put("requestedTokens", settings.requestedTokens());
		rate.put("includeHeaders", limiter.isIncludeHeaders());
		rate.put("key", "header " + settings.callerHeader());
		rate.put("denyEmptyKey", settings.denyEmptyKey());
		rate.put("emptyKeyStatus", settings.emptyKeyStatus().value());
		rate.put("on_store_error", "RedisRateLimiter's own: allowed, X-RateLimit-Remaining -1");
		line.put("request_rate_limiter", rate);

		LettuceClientConfiguration cc = factory.getClientConfiguration();
		Map<String, Object> lettuce = new LinkedHashMap<>();
		lettuce.put("url", settings.redisUrl());
		lettuce.put("sentinels", factory.getSentinelConfiguration() == null ? null
				: factory.getSentinelConfiguration().getSentinels().toString());
		lettuce.put("command_timeout", cc.getCommandTimeout().toString());
		lettuce.put("shutdown_timeout", cc.getShutdownTimeout().toString());
		lettuce.put("share_native_connection", factory.getShareNativeConnection());
		lettuce.put("validate_connection", factory.getValidateConnection());
		lettuce.put("pooling", cc.getClass().getSimpleName().contains("Pooling"));
		ClientOptions o = cc.getClientOptions().orElse(null);
		if (o != null) {
			SocketOptions so = o.getSocketOptions();
			lettuce.put("connect_timeout", so.getConnectTimeout().toString());
			lettuce.put("disconnected_behavior", o.getDisconnectedBehavior().name());
			lettuce.put("auto_reconnect", o.isAutoReconnect());
			lettuce.put("request_queue_size", o.getRequestQueueSize());
			lettuce.put("timeout_commands", o.getTimeoutOptions().isTimeoutCommands());
			lettuce.put("ping_before_activate", o.isPingBeforeActivateConnection());
			lettuce.put("protocol", o.getConfiguredProtocolVersion() == null
					? "not set: " + o.getProtocolVersion() + " if HELLO works, else RESP2" : o.getConfiguredProtocolVersion().name());
			lettuce.put("cancel_commands_on_reconnect_failure", o.isCancelCommandsOnReconnectFailure());
			lettuce.put("suspend_reconnect_on_protocol_failure", o.isSuspendReconnectOnProtocolFailure());
			lettuce.put("publish_on_scheduler", o.isPublishOnScheduler());
			lettuce.put("tcp_keepalive", so.isKeepAlive());
			lettuce.put("tcp_nodelay", so.isTcpNoDelay());
		}
		ClientResources res = cc.getClientResources().orElse(null);
		if (res != null) {
			lettuce.put("io_threads", res.ioThreadPoolSize());
			lettuce.put("computation_threads", res.computationThreadPoolSize());
			lettuce.put("reconnect_delay", res.reconnectDelay().getClass().getSimpleName());
		}
		line.put("lettuce", lettuce);
		line.put("log_stack_traces", settings.logStackTraces());

		Runtime rt = Runtime.getRuntime();
		Map<String, Object> jvm = new LinkedHashMap<>();
		jvm.put("processors", rt.availableProcessors());
		jvm.put("max_heap_mb", rt.maxMemory() >> 20);
		List<String> flags = ManagementFactory.getRuntimeMXBean().getInputArguments();
		jvm.put("flags", String.join(" ", flags));
		jvm.put("start_ms", ManagementFactory.getRuntimeMXBean().getUptime());
		line.put("jvm", jvm);

		System.err.println("started " + json(line));
	}

	private static String json(Object v) {
		if (v instanceof Map<?, ?> m) {
			return m.entrySet()
				.stream()
				.map(e -> json(String.valueOf(e.getKey())) + ":" + json(e.getValue()))
				.collect(Collectors.joining(",", "{", "}"));
		}
		if (v instanceof Number || v instanceof Boolean) {
			return String.valueOf(v);
		}
		String s = String.valueOf(v).replace("\\", "\\\\").replace("\"", "\\\"");
		return "\"" + s + "\"";
	}

}
