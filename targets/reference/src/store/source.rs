//! Where the store's connection goes: one address (`--redis-url`), or the primary that a set
//! of Redis Sentinels names (`--redis-sentinels`). The sentinels are asked again on every
//! reconnect, and the answer is checked (`ROLE` says master) before it is used, so after a
//! failover the next connection goes to the promoted replica.

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, ConnectionAddr, RedisResult};

/// The sentinels to ask and the name they monitor the primary under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelSettings {
    pub addrs: Vec<(String, u16)>,
    pub master: String,
}

impl SentinelSettings {
    /// From `host:port,host:port` and the primary's name; `None` when no address is given.
    pub fn parse(addrs: &[String], master: &str) -> Result<Option<Self>, String> {
        let addrs = addrs
            .iter()
            .map(|a| a.trim())
            .filter(|a| !a.is_empty())
            .map(|a| {
                let (host, port) = a
                    .rsplit_once(':')
                    .ok_or_else(|| format!("{a:?} is not host:port"))?;
                let port = port
                    .parse()
                    .map_err(|_| format!("{a:?}: {port:?} is not a port"))?;
                Ok((host.to_owned(), port))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if addrs.is_empty() {
            return Ok(None);
        }
        if master.is_empty() {
            return Err("the primary's name the sentinels monitor is empty".into());
        }
        Ok(Some(Self {
            addrs,
            master: master.to_owned(),
        }))
    }
}

pub(crate) enum Source {
    Direct(Client),
    /// Behind an async lock: asking the sentinels updates the client's cache of them.
    Sentinels(tokio::sync::Mutex<SentinelClient>),
}

/// `SentinelClient` has no `Debug` of its own.
impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Direct(client) => f.debug_tuple("Direct").field(client).finish(),
            Self::Sentinels(_) => f.write_str("Sentinels"),
        }
    }
}

impl Source {
    pub(crate) fn sentinels(
        settings: &SentinelSettings,
        tcp: redis::io::tcp::TcpSettings,
    ) -> RedisResult<Self> {
        let addrs = settings
            .addrs
            .iter()
            .map(|(host, port)| ConnectionAddr::Tcp(host.clone(), *port));
        let client =
            SentinelClientBuilder::new(addrs, &settings.master, SentinelServerType::Master)?
                .set_client_to_redis_tcp_settings(tcp)
                .build()?;
        Ok(Self::Sentinels(tokio::sync::Mutex::new(client)))
    }

    /// A client of the Redis to connect to now.
    pub(crate) async fn client(&self) -> RedisResult<Client> {
        match self {
            Self::Direct(client) => Ok(client.clone()),
            Self::Sentinels(sentinels) => sentinels.lock().await.async_get_client().await,
        }
    }
}

/// `url` without its user name and password, for logs: a Redis URL may carry an ACL password.
/// Text that does not parse as a URL is shown as a placeholder, since it cannot be cleaned.
pub fn redacted_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() || !u.username().is_empty() {
                // Both only fail for URLs that cannot hold credentials, which have none.
                let _ = u.set_username("");
                let _ = u.set_password(None);
            }
            u.to_string()
        }
        Err(_) => "(a Redis URL that does not parse)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_are_read_as_host_port_pairs_and_none_given_means_one_address() {
        let given = ["127.0.0.1:26379".to_owned(), " localhost:26380".to_owned()];
        let s = SentinelSettings::parse(&given, "failmode")
            .unwrap()
            .unwrap();
        assert_eq!(
            s.addrs,
            [
                ("127.0.0.1".to_owned(), 26379),
                ("localhost".to_owned(), 26380)
            ]
        );
        assert_eq!(SentinelSettings::parse(&[String::new()], "m"), Ok(None));
        assert!(SentinelSettings::parse(&["nohost".into()], "m").is_err());
        assert!(SentinelSettings::parse(&["h:port".into()], "m").is_err());
        assert!(SentinelSettings::parse(&["h:1".into()], "").is_err());
    }

    #[test]
    fn a_logged_redis_url_carries_no_credentials() {
        assert_eq!(
            redacted_url("redis://app:s3cret@10.0.0.5:6379/2"),
            "redis://10.0.0.5:6379/2"
        );
        assert_eq!(
            redacted_url("rediss://:s3cret@cache.internal:6380"),
            "rediss://cache.internal:6380"
        );
        assert_eq!(
            redacted_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert!(!redacted_url("not a url s3cret").contains("s3cret"));
    }
}
