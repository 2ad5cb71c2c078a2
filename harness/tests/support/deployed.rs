//! A deployment started by hand on loopback, as its operator would and not by failmode: a
//! redis-server, a Toxiproxy with the proxy `deployed-redis` in front of it, two reference
//! instances reaching Redis through it, and the deployment file (`deployment.toml` in `dir`)
//! that attaches to them.

use std::time::Duration;

use failmode::deployment::Deployment;
use failmode::infra::toxiproxy::Toxiproxy;
use failmode::infra::{RedisServer, ToxiproxyServer};
use failmode::targets::{self, Instance, Launch};

use super::workspace;

/// Everything the "deployment" runs, started as its operator would, not by failmode.
pub(crate) struct ByHand {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) redis: RedisServer,
    _toxiproxy: ToxiproxyServer,
    pub(crate) api: Toxiproxy,
    pub(crate) instances: Vec<Instance>,
    pub(crate) deployment: Deployment,
}

pub(crate) async fn by_hand() -> ByHand {
    by_hand_of("reference", &[], "").await
}

/// [`by_hand`] with the reference's `target` variant (a policy, such as `fail-closed`), `env`
/// set on top of its manifest's, and `extra` appended to the deployment file (its `[[abort]]`
/// tables, say).
pub(crate) async fn by_hand_of(target: &str, env: &[(&str, &str)], extra: &str) -> ByHand {
    let all = targets::manifest::discover(&workspace().join("targets")).unwrap();
    let mut defs = targets::manifest::select(&all, &[target.to_owned()]).unwrap();
    for (key, value) in env {
        defs[0].env.insert((*key).to_owned(), (*value).to_owned());
    }
    targets::build(&defs, &workspace()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let redis = RedisServer::start("redis-deployed", dir.path())
        .await
        .unwrap();
    let toxiproxy = ToxiproxyServer::start(dir.path()).await.unwrap();
    let api = Toxiproxy::new(toxiproxy.api_addr());
    let proxy = api
        .create_proxy(
            "deployed-redis",
            "127.0.0.1:0".parse().unwrap(),
            redis.addr(),
        )
        .await
        .unwrap();
    let launch = Launch {
        root: &workspace(),
        log_dir: dir.path(),
        redis_url: &format!("redis://{}", proxy.listen_addr().unwrap()),
        sentinel: None,
        instance_count: 2,
        limit: 50.0,
        window: Duration::from_secs(1),
    };
    let http = reqwest::Client::new();
    let mut instances = Vec::new();
    for i in 0..2 {
        instances.push(
            targets::start_instance(&defs[0], i, &launch, &http)
                .await
                .unwrap(),
        );
    }
    let text = format!(
        "toxiproxy = \"http://{}\"\n\n[[targets]]\nname = \"{target}\"\ninstances = [{}]\n\
         proxy = \"deployed-redis\"\nredis_admin = \"redis://{}\"\n{extra}",
        toxiproxy.api_addr(),
        instances
            .iter()
            .map(|i| format!("\"http://{}\"", i.addr))
            .collect::<Vec<_>>()
            .join(", "),
        redis.addr()
    );
    let path = dir.path().join("deployment.toml");
    std::fs::write(&path, &text).unwrap();
    let deployment = Deployment::read(&path, false).unwrap();
    ByHand {
        dir,
        redis,
        _toxiproxy: toxiproxy,
        api,
        instances,
        deployment,
    }
}
