//! The world most integration tests start from: a redis-server and a toxiproxy-server on free
//! loopback ports, in a temporary directory, with one proxy in front of the Redis.

use std::net::SocketAddr;

use failmode::infra::toxiproxy::Toxiproxy;
use failmode::infra::{RedisServer, ToxiproxyServer};

pub(crate) struct ProxiedRedis {
    /// Logs of both servers; removed with the world.
    pub dir: tempfile::TempDir,
    pub redis: RedisServer,
    pub toxiproxy: ToxiproxyServer,
    pub api: Toxiproxy,
    /// The proxy's name in Toxiproxy.
    pub proxy: String,
    /// Where the proxy listens: the address a target is given as its Redis.
    pub listen: SocketAddr,
}

impl ProxiedRedis {
    /// Starts both servers (the Redis named `redis-NAME` in its log) and the proxy `proxy`.
    pub(crate) async fn start(name: &str, proxy: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let redis = RedisServer::start(&format!("redis-{name}"), dir.path())
            .await
            .unwrap();
        let toxiproxy = ToxiproxyServer::start(dir.path()).await.unwrap();
        let api = Toxiproxy::new(toxiproxy.api_addr());
        let created = api
            .create_proxy(proxy, "127.0.0.1:0".parse().unwrap(), redis.addr())
            .await
            .unwrap();
        assert!(created.enabled);
        assert_eq!(created.upstream, redis.addr().to_string());
        let listen = created.listen_addr().expect("the bound listen address");
        assert_ne!(listen.port(), 0, "Toxiproxy reports the port it bound");
        Self {
            dir,
            redis,
            toxiproxy,
            api,
            proxy: proxy.to_owned(),
            listen,
        }
    }
}
