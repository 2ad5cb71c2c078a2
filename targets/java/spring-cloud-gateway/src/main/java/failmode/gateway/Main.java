package failmode.gateway;

import java.util.LinkedHashMap;
import java.util.Map;

import org.springframework.boot.Banner;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.env.MapPropertySource;

/**
 * failmode target: Spring Cloud Gateway (WebFlux) with its RequestRateLimiter filter and
 * RedisRateLimiter, in front of a trivial handler. Every setting comes from the environment
 * (see target.toml); a missing or invalid one stops it before Spring starts, with one line
 * per problem on stderr and exit code 64.
 */
public final class Main {

	static final int EXIT_USAGE = 64;

	private Main() {
	}

	public static void main(String[] args) {
		Settings settings;
		try {
			settings = Settings.read(System.getenv());
		}
		catch (Settings.Invalid e) {
			for (String p : e.problems) {
				System.err.println("invalid setting: " + p);
			}
			System.exit(EXIT_USAGE);
			return;
		}

		// The Spring properties the settings map to, put first so that nothing else (an
		// application.properties, a stray SPRING_* variable) can change them unseen.
		Map<String, Object> props = new LinkedHashMap<>();
		props.put("server.address", settings.bind());
		props.put("server.port", settings.port());
		props.put("spring.data.redis.url", settings.redisUrl());
		// A Sentinel topology's (the manifest's [start.sentinel_env]): Spring Data Redis's
		// sentinel configuration, which Spring Boot prefers to the URL; Lettuce then asks the
		// sentinels for the primary.
		String sentinels = System.getenv("FAILMODE_REDIS_SENTINELS");
		if (sentinels != null && !sentinels.isBlank()) {
			String master = System.getenv("FAILMODE_REDIS_SENTINEL_MASTER");
			if (master == null || master.isBlank()) {
				System.err.println("invalid setting: FAILMODE_REDIS_SENTINEL_MASTER is missing");
				System.exit(EXIT_USAGE);
				return;
			}
			props.put("spring.data.redis.sentinel.master", master.strip());
			props.put("spring.data.redis.sentinel.nodes", sentinels.strip());
		}
		props.put("spring.data.redis.timeout", settings.commandTimeoutMs() + "ms");
		props.put("spring.data.redis.connect-timeout", settings.connectTimeoutMs() + "ms");
		props.put("spring.application.name", "failmode-spring-cloud-gateway");

		SpringApplication app = new SpringApplication(GatewayApp.class);
		app.setBannerMode(Banner.Mode.OFF);
		if (!settings.logStackTraces()) {
			// Read when logging starts, before the initializer below runs. The exception and
			// each "Caused by" stay, one line each, without their stack frames.
			app.setDefaultProperties(Map.of("logging.exception-conversion-word", "%ex{0}"));
		}
		app.addInitializers((ConfigurableApplicationContext ctx) -> {
			ctx.getEnvironment().getPropertySources().addFirst(new MapPropertySource("failmode-settings", props));
			ctx.getBeanFactory().registerSingleton("failmodeSettings", settings);
		});
		app.run(args);
	}

}
