//! The load engine's senders and connections against a real loopback server: a schedule split
//! over several sender threads sends the same requests as one thread; a target's connection
//! cap drops what is due beyond it, never delays it; without keep-alive every request opens
//! its own connection, with it they share a few; and every connection opened is counted.
//!
//! The server is the test kit's scripted one (`support::scripted_server`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::num::NonZeroUsize;
use std::time::Duration;

use failmode::load::{DropCause, LoadPlan, Outcome, Senders, Spread};
use support::engine::{assert_accounted, plan, run, tenant};
use support::scripted_server::{Action, Server, answer};
use tokio_util::sync::CancellationToken;

fn senders(n: usize) -> Senders {
    Senders::Fixed(NonZeroUsize::new(n).unwrap())
}

/// Four tenants of different rates at one server, for one second.
fn four_tenants(server: &Server) -> LoadPlan {
    plan(
        vec![server.addr],
        vec![
            tenant("acme", 300.0, Spread::RoundRobin),
            tenant("globex", 100.0, Spread::RoundRobin),
            tenant("initech", 200.0, Spread::Sticky),
            tenant("umbrella", 50.0, Spread::Sticky),
        ],
        Duration::from_secs(1),
    )
}

#[tokio::test]
async fn a_schedule_split_over_two_senders_sends_exactly_the_requests_one_sender_sends() {
    let server = Server::start(|_| answer(200)).await;
    let mut requests = Vec::new();
    for n in [1, 2] {
        let mut plan = four_tenants(&server);
        plan.senders = senders(n);
        let (summary, samples, _) = run(plan, CancellationToken::new()).await;
        assert_accounted(&summary, &samples);
        assert_eq!(summary.dropped, 0, "{n} senders: {summary:?}");
        let mut sent: Vec<(usize, Duration, usize)> = samples
            .all()
            .iter()
            .map(|s| (s.tenant, s.scheduled, s.instance))
            .collect();
        sent.sort_unstable();
        requests.push(sent);
    }
    assert_eq!(requests[0].len(), 650);
    assert_eq!(
        requests[0], requests[1],
        "the same tenants, schedule and instances"
    );
    for (caller, rate) in [("acme", 300), ("globex", 100), ("initech", 200)] {
        assert_eq!(server.count_of(caller), 2 * rate, "{caller}, both runs");
    }
}

#[tokio::test]
async fn requests_due_beyond_a_targets_connection_cap_are_dropped_as_such_not_delayed() {
    // Answers come after the whole schedule: the first five hold the five connections.
    let server = Server::start(|_| Action::Answer {
        status: 200,
        after: Duration::from_millis(700),
    })
    .await;
    let mut plan = plan(
        vec![server.addr],
        vec![tenant("acme", 100.0, Spread::Sticky)],
        Duration::from_millis(500),
    );
    plan.targets[0].connections.max = NonZeroUsize::new(5);
    let (summary, samples, _) = run(plan, CancellationToken::new()).await;

    assert_accounted(&summary, &samples);
    assert_eq!(
        (summary.scheduled, summary.sent, summary.dropped),
        (50, 5, 45)
    );
    assert_eq!(summary.dropped_by_cause.connection_cap, 45);
    assert_eq!(server.connections(), 5);
    let at_the_cap = Outcome::Dropped(DropCause::ConnectionCap);
    assert_eq!(samples.outcomes()[&at_the_cap], 45);
    assert!(
        samples
            .all()
            .iter()
            .filter(|s| s.outcome == at_the_cap)
            .all(|s| s.send_lag == Duration::ZERO && s.new_connections == 0),
        "dropped at its scheduled time, never sent"
    );
}

#[tokio::test]
async fn without_keep_alive_every_request_opens_a_connection_and_with_it_they_share_a_few() {
    for keep_alive in [false, true] {
        let server = Server::start(|_| answer(200)).await;
        let mut plan = plan(
            vec![server.addr],
            vec![tenant("acme", 200.0, Spread::Sticky)],
            Duration::from_secs(1),
        );
        plan.targets[0].connections.keep_alive = keep_alive;
        let (summary, samples, _) = run(plan, CancellationToken::new()).await;
        assert_accounted(&summary, &samples);
        assert_eq!(summary.sent, 200);

        let opened: u32 = samples.all().iter().map(|s| s.new_connections).sum();
        assert_eq!(
            opened as usize,
            server.connections(),
            "keep-alive {keep_alive}: every connection the server accepted is counted once"
        );
        if keep_alive {
            // 5 ms apart and answered at once: one connection carries nearly all of them.
            assert!(opened <= 5, "{opened} connections for 200 requests");
        } else {
            assert_eq!(opened, 200);
            assert!(samples.all().iter().all(|s| s.new_connections == 1));
        }
    }
}
