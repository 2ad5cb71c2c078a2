//! The faults in a target's topology (`scale`, `kill-instance`) on real reference instances
//! behind a real Toxiproxy, played as a run plays them: the instances really started or
//! died (their processes, their readiness, the instance count they were configured with,
//! the balancer's rotation), and removing the fault put the fleet back at its size.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use failmode::faults::Fault;
use failmode::infra::{RedisServer, ToxiproxyServer};
use failmode::run::timeline::Player;
use failmode::targets::{self, Fleet, FleetLaunch, TargetDef};
use support::proxied::ProxiedRedis;
use support::workspace;

struct World {
    _dir: tempfile::TempDir,
    _toxiproxy: ToxiproxyServer,
    _redis: RedisServer,
    fleet: Arc<Fleet>,
    player: Player,
    http: reqwest::Client,
}

async fn reference() -> TargetDef {
    let all = targets::manifest::discover(&workspace().join("targets")).unwrap();
    let defs = targets::manifest::select(&all, &["reference".to_owned()]).unwrap();
    targets::build(&defs, &workspace()).await.unwrap();
    defs.into_iter().next().unwrap()
}

/// A reference fleet of `count` on a real Redis through a Toxiproxy proxy, `down` if asked.
async fn world(count: u32, down: bool) -> World {
    let def = reference().await;
    let ProxiedRedis {
        dir,
        redis,
        toxiproxy,
        api,
        listen,
        ..
    } = ProxiedRedis::start("topology", "reference").await;
    if down {
        api.set_enabled("reference", false).await.unwrap();
    }
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let launch = FleetLaunch {
        root: workspace(),
        log_dir: dir.path().to_owned(),
        redis_url: format!("redis://{listen}"),
        sentinel: None,
        limit: 50.0,
        window: Duration::from_secs(1),
    };
    let (fleet, started) = Fleet::start(&def, launch, count, &http).await;
    started.unwrap();
    let fleet = Arc::new(fleet);
    let player =
        Player::new(api, vec!["reference".into()]).with_fleets(vec![Some(Arc::clone(&fleet))]);
    World {
        _dir: dir,
        _toxiproxy: toxiproxy,
        _redis: redis,
        fleet,
        player,
        http,
    }
}

/// The instance's own gauge of the instances it divides the limit by.
async fn live_instances(http: &reqwest::Client, addr: std::net::SocketAddr) -> f64 {
    let body = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix("failmode_live_instances "))
        .unwrap_or_else(|| panic!("no failmode_live_instances in {body}"))
        .trim()
        .parse()
        .unwrap()
}

fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_starts_instances_told_the_old_count_and_its_end_stops_them_again() {
    // Redis cut, as in `scale-out-outage`: the new instances cannot count their peers.
    let w = world(2, true).await;
    let rotation = w.fleet.rotation();
    let before: Vec<u32> = w.fleet.running().iter().map(|i| i.pid).collect();
    let scale = [Fault::Scale {
        to: 4,
        instance_count: Some(2),
    }];

    let applied = w
        .player
        .apply("p", &scale, &[], Duration::from_secs(5))
        .await;
    let report = &applied[0].as_ref().unwrap().reports[0];
    assert!(report.contains("scaled out 2 → 4"), "{report}");
    let running = w.fleet.running();
    assert_eq!(running.len(), 4);
    assert_eq!((rotation.len(), rotation.in_rotation()), (4, 4));
    for i in &running[2..] {
        assert!(alive(i.pid));
        let ready = w
            .http
            .get(format!("http://{}/healthz", i.addr))
            .send()
            .await
            .unwrap();
        assert!(ready.status().is_success());
        // Told 2 by its configuration, and no Redis to learn otherwise from.
        assert_eq!(
            live_instances(&w.http, i.addr).await,
            2.0,
            "instance {}",
            i.index
        );
    }

    let removed = w.player.remove("p", &scale, &[]).await;
    let report = &removed[0].as_ref().unwrap().reports[0];
    assert!(report.contains("scaled in 4 → 2"), "{report}");
    let after: Vec<u32> = w.fleet.running().iter().map(|i| i.pid).collect();
    assert_eq!(after, before, "the first two kept, the new ones stopped");
    assert!(running[2..].iter().all(|i| !alive(i.pid)));
    assert_eq!(rotation.in_rotation(), 2);
    w.fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_instance_sigkills_one_and_a_new_one_takes_its_place_after_restart() {
    let w = world(3, false).await;
    let rotation = w.fleet.rotation();
    let victim = w.fleet.running()[1].clone();
    let kill = Fault::KillInstance {
        instance: 1,
        restart: Some(Duration::from_millis(300)),
    };

    let applied = w
        .player
        .apply(
            "p",
            std::slice::from_ref(&kill),
            &[],
            Duration::from_secs(5),
        )
        .await;
    let report = &applied[0].as_ref().unwrap().reports[0];
    assert!(
        report.contains("instance 1") && report.contains("SIGKILL"),
        "{report}"
    );
    assert!(!alive(victim.pid));
    assert_eq!(w.fleet.size(), 2);
    assert_eq!(rotation.in_rotation(), 2);
    assert!(!rotation.members()[1].in_rotation);

    // What runs beside the load: the replacement, `restart` after the phase's start.
    let from = std::time::Instant::now();
    let cancel = tokio_util::sync::CancellationToken::new();
    let replaced = w
        .player
        .ongoing(&kill, from, from + Duration::from_secs(5), &cancel)
        .await;
    assert!(from.elapsed() >= Duration::from_millis(300));
    let report = &replaced[0].1.as_ref().unwrap().reports[0];
    assert!(report.contains("in place of instance 1"), "{report}");
    let running = w.fleet.running();
    assert_eq!(
        running.iter().map(|i| i.index).collect::<Vec<_>>(),
        [0, 2, 3]
    );
    assert_eq!(rotation.in_rotation(), 3);
    // Configured as the first ones were; Redis up, so it also heard their heartbeats.
    assert!(live_instances(&w.http, running[2].addr).await >= 3.0);

    // Replaced already: the fault's end has nothing left to do.
    let removed = w.player.remove("p", std::slice::from_ref(&kill), &[]).await;
    assert!(removed[0].as_ref().unwrap().reports.is_empty());
    assert_eq!(w.fleet.size(), 3);
    w.fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instance_without_restart_is_replaced_at_the_faults_end_and_a_wrong_one_is_named()
{
    let w = world(2, false).await;
    let kill = [Fault::KillInstance {
        instance: 0,
        restart: None,
    }];
    assert!(
        w.player
            .apply("p", &kill, &[], Duration::from_secs(5))
            .await[0]
            .is_ok()
    );
    assert_eq!(w.fleet.size(), 1);
    let removed = w.player.remove("p", &kill, &[]).await;
    assert!(removed[0].as_ref().unwrap().reports[0].contains("in place of instance 0"));
    assert_eq!(w.fleet.size(), 2);

    let wrong = [Fault::KillInstance {
        instance: 7,
        restart: None,
    }];
    let e = w
        .player
        .apply("p", &wrong, &[], Duration::from_secs(5))
        .await[0]
        .as_ref()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no running instance 7") && e.contains("[1, 2]"),
        "{e}"
    );
    w.fleet.stop().await;
}
