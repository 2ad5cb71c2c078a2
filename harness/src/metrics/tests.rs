use super::*;
use crate::load::{DropCause, TransportError};

const DROPPED: Outcome = Outcome::Dropped(DropCause::InFlightBound);

fn sample(target: usize, tenant: usize, at_ms: u64, outcome: Outcome) -> Sample {
    Sample {
        target,
        tenant,
        instance: 0,
        scheduled: Duration::from_millis(at_ms),
        send_lag: Duration::from_micros(50),
        latency: Duration::from_millis(2),
        service_time: Duration::from_millis(1),
        outcome,
        attempts: u32::from(!matches!(outcome, Outcome::Dropped(_) | Outcome::Throttled)),
        new_connections: 0,
    }
}

#[test]
fn samples_land_in_their_phase_and_second_by_scheduled_time() {
    let c = Collector::new(Shape {
        targets: 2,
        tenants: 2,
        phases: vec![
            (Duration::ZERO, Duration::from_secs(2)),
            (Duration::from_secs(2), Duration::from_secs(3)),
        ],
        duration: Duration::from_secs(3),
        longest_request: Duration::from_secs(2),
        request_timeout: Duration::from_secs(2),
    });
    c.record(&sample(1, 0, 500, Outcome::Admitted));
    c.record(&sample(1, 0, 1999, Outcome::Limited));
    c.record(&sample(
        1,
        0,
        2000,
        Outcome::Transport(TransportError::Timeout),
    ));
    c.record(&sample(0, 1, 2500, DROPPED));
    let m = c.snapshot();
    let steady = &m.cells[1][0][0].counts;
    assert_eq!((steady.offered, steady.admitted, steady.limited), (2, 1, 1));
    assert_eq!(m.cells[1][0][1].counts.transport_error, 1);
    assert_eq!(m.cells[0][1][1].counts.dropped, 1);
    // Not sent, so no service time; but its latency is counted as the request timeout
    // (2 s here), so that dropping requests can never make the tail look better.
    let dropped = &m.cells[0][1][1];
    assert_eq!(dropped.latency.len(), 1);
    assert!(
        dropped.latency.max() >= 2_000_000,
        "{}",
        dropped.latency.max()
    );
    assert_eq!(dropped.service_time.len(), 0, "it was never sent");
    assert_eq!(c.live(0).dropped.load(Ordering::Relaxed), 1);
    assert_eq!(m.seconds[1][0][1].counts.offered, 1);
    assert_eq!(m.seconds[1][0][2].counts.offered, 1);
    assert_eq!(c.live(1).done.load(Ordering::Relaxed), 3);
    assert_eq!(c.live(1).transport.load(Ordering::Relaxed), 1);
}

#[test]
fn dropped_requests_count_in_latency_as_the_request_timeout_so_drops_never_improve_p99() {
    // A stall: 50 requests answered in 1 ms, 330 dropped at the in-flight bound.
    let timeout = Duration::from_secs(2);
    let c = Collector::new(Shape {
        targets: 1,
        tenants: 2,
        phases: vec![(Duration::ZERO, Duration::from_secs(5))],
        duration: Duration::from_secs(5),
        longest_request: timeout,
        request_timeout: timeout,
    });
    for i in 0..380u64 {
        let mut s = sample(
            0,
            0,
            1_000 + i,
            if i < 50 { Outcome::Admitted } else { DROPPED },
        );
        if i < 50 {
            (s.send_lag, s.latency, s.service_time) = (
                Duration::ZERO,
                Duration::from_millis(1),
                Duration::from_millis(1),
            );
        } else {
            // As the engine records a drop: no durations at all.
            (s.send_lag, s.latency, s.service_time) =
                (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        }
        c.record(&s);
    }
    let m = c.snapshot();
    let cell = &m.cells[0][0][0];
    assert_eq!((cell.counts.offered, cell.counts.dropped), (380, 330));
    let timeout_us = timeout.as_micros() as u64;
    assert!(
        cell.latency.value_at_quantile(0.99) >= timeout_us,
        "phase p99 {} µs",
        cell.latency.value_at_quantile(0.99)
    );
    assert_eq!(
        cell.service_time.len(),
        50,
        "only what was sent has a service time"
    );
    // The second's figures, the tenant's and all tenants': two significant figures.
    for slot in [0, 2] {
        let p99 = m.seconds[0][slot][1].p99_us;
        assert!(
            p99 >= timeout_us * 99 / 100,
            "slot {slot}: second p99 {p99} µs"
        );
    }
    assert_eq!(m.send_lag[0].len(), 50, "a drop has no send lag");
}

#[test]
fn seconds_close_once_no_answer_can_come_and_keep_their_percentiles() {
    let c = Collector::new(Shape {
        targets: 1,
        tenants: 1,
        phases: vec![(Duration::ZERO, Duration::from_secs(20))],
        duration: Duration::from_secs(20),
        longest_request: Duration::from_secs(2),
        request_timeout: Duration::from_secs(2),
    });
    c.record(&sample(0, 0, 1_000, Outcome::Admitted));
    c.record(&sample(0, 0, 10_000, Outcome::Admitted));
    let closed = c.checkpoint_at(Duration::from_secs(10));
    {
        let state = c.inner.lock().unwrap();
        let open: Vec<usize> = state.open[0][0].by_second.keys().copied().collect();
        assert_eq!(
            open,
            [10],
            "second 1 closed once the load reached second 10"
        );
    }
    let one = closed.seconds.iter().find(|s| s.second == 1).unwrap();
    // Two significant figures: within 1 % of the 2 ms recorded.
    assert!((1_980..=2_020).contains(&one.summary.p99_us));
    // A very late answer for a closed second still counts, without its latency.
    c.record(&sample(0, 0, 1_500, Outcome::Limited));
    let m = c.snapshot();
    assert_eq!(m.seconds[0][0][1].counts.offered, 2);
    assert!(
        (1_980..=2_020).contains(&m.seconds[0][0][10].p50_us),
        "open seconds are summarised too"
    );
}

#[test]
fn a_checkpoint_hands_out_each_closed_second_once_and_only_the_cells_that_changed() {
    let c = Collector::new(Shape {
        targets: 2,
        tenants: 1,
        phases: vec![
            (Duration::ZERO, Duration::from_secs(5)),
            (Duration::from_secs(5), Duration::from_secs(10)),
        ],
        duration: Duration::from_secs(10),
        longest_request: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
    });
    c.record(&sample(1, 0, 1_500, Outcome::Admitted));
    c.record(&sample(1, 0, 2_500, Outcome::Limited));
    let first = c.checkpoint(2);
    // Seconds 0 and 1 of both targets and both slots (the tenant, all tenants), idle or not.
    assert_eq!(first.seconds.len(), 2 * 2 * 2);
    let one = first
        .seconds
        .iter()
        .find(|s| (s.target, s.slot, s.second) == (1, 0, 1))
        .unwrap();
    assert_eq!(one.summary.counts.admitted, 1);
    let packed = one
        .latency
        .as_ref()
        .expect("a second with an answer has a latency");
    assert_eq!(unpack(packed).unwrap().len(), 1);
    assert!(
        first
            .seconds
            .iter()
            .filter(|s| s.target == 0)
            .all(|s| s.latency.is_none())
    );
    assert_eq!(first.cells.len(), 1, "only target 1's first phase changed");
    assert_eq!(first.cells[0].0, (1, 0, 0));
    assert_eq!(first.cells[0].1.counts.offered, 2);
    assert_eq!(first.send_lag.len(), 1);

    let again = c.checkpoint(2);
    assert!(again.seconds.is_empty() && again.cells.is_empty() && again.send_lag.is_empty());
    c.record(&sample(1, 0, 6_000, Outcome::Admitted));
    let last = c.checkpoint(usize::MAX);
    assert_eq!(
        last.seconds.len(),
        2 * 2 * 8,
        "seconds 2 to 9, the end of the run"
    );
    assert_eq!(last.cells.len(), 1);
    assert_eq!(last.cells[0].0, (1, 0, 1));
    // Handed out, so no longer kept: memory does not grow with the run's length.
    assert!(
        c.snapshot()
            .second_latency
            .iter()
            .flatten()
            .all(BTreeMap::is_empty)
    );
    assert_eq!(
        c.snapshot().seconds[1][0][2].counts.limited,
        1,
        "counts stay"
    );
}

#[test]
fn seconds_close_by_the_loads_clock_so_a_stalled_sender_finds_its_seconds_open() {
    let c = Collector::new(Shape {
        targets: 1,
        tenants: 1,
        phases: vec![(Duration::ZERO, Duration::from_secs(30))],
        duration: Duration::from_secs(30),
        longest_request: Duration::from_millis(1_500),
        request_timeout: Duration::from_millis(1_500),
    });
    c.record(&sample(0, 0, 3_500, Outcome::Admitted));
    // 20 s of wall time, but nothing sent after second 3: the load may be stalled, with a
    // backlog of second 3's arrivals still to record. Its drops do not move the clock.
    assert!(c.checkpoint_at(Duration::from_secs(20)).seconds.is_empty());
    c.record(&sample(0, 0, 9_000, DROPPED));
    assert!(c.checkpoint_at(Duration::from_secs(20)).seconds.is_empty());
    c.record(&sample(0, 0, 3_600, DROPPED));
    let m = c.snapshot();
    assert_eq!(m.seconds[0][0][3].counts.dropped, 1);
    assert!(
        m.seconds[0][0][3].max_us >= 1_500_000,
        "the drop's latency counted"
    );
    // Sent at second 7: second 3's requests may still be sent a second late (MAX_LATE) and
    // answered 1.5 s after, so it stays open; at second 8 it closes.
    let closed_by = |at_ms: u64| -> Option<usize> {
        c.record(&sample(0, 0, at_ms, Outcome::Admitted));
        c.checkpoint_at(Duration::from_secs(20))
            .seconds
            .iter()
            .map(|s| s.second)
            .max()
    };
    assert_eq!(closed_by(7_100), Some(2));
    assert_eq!(closed_by(8_100), Some(3));
    assert_eq!(
        c.checkpoint(0).totals.offered,
        5,
        "every sample, counted once"
    );
}

#[test]
fn with_two_senders_seconds_close_only_once_the_slower_one_has_dispatched_past_them() {
    let c = Collector::new(Shape {
        targets: 1,
        tenants: 2,
        phases: vec![(Duration::ZERO, Duration::from_secs(30))],
        duration: Duration::from_secs(30),
        longest_request: Duration::from_millis(1_500),
        request_timeout: Duration::from_millis(1_500),
    });
    let closed = |c: &Collector| {
        c.checkpoint_at(Duration::from_secs(20))
            .seconds
            .iter()
            .map(|s| s.second)
            .max()
    };
    // Sender 0 (tenant 0) is at second 12; sender 1 (tenant 1) stalled at second 3.
    c.record(&sample(0, 0, 12_100, Outcome::Admitted));
    c.record(&sample(0, 1, 3_100, Outcome::Admitted));
    c.dispatched(0, 2, Duration::from_millis(12_200));
    c.dispatched(1, 2, Duration::from_millis(3_200));
    assert_eq!(closed(&c), None, "second 3 and before: held for sender 1");
    // Sender 1 catches up to second 8 (its backlog dropped, recorded in its seconds).
    c.record(&sample(0, 1, 3_900, DROPPED));
    c.dispatched(1, 2, Duration::from_millis(8_000));
    assert_eq!(
        closed(&c),
        Some(3),
        "second 3 closes once both passed second 7"
    );
    let m = c.snapshot();
    assert!(
        m.seconds[0][1][3].max_us >= 1_500_000,
        "the late drop found its second open and counted its latency"
    );
    // Done senders hold nothing back.
    c.dispatched(0, 2, Duration::MAX);
    c.dispatched(1, 2, Duration::MAX);
    assert_eq!(
        closed(&c),
        Some(7),
        "by the latest second sent (12) less the hold"
    );
}

#[test]
fn two_halves_of_the_samples_add_up_to_the_whole_exactly() {
    let shape = Shape {
        targets: 1,
        tenants: 2,
        phases: vec![
            (Duration::ZERO, Duration::from_secs(3)),
            (Duration::from_secs(3), Duration::from_secs(6)),
        ],
        duration: Duration::from_secs(6),
        longest_request: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
    };
    let (whole, halves) = (
        Collector::new(shape.clone()),
        [Collector::new(shape.clone()), Collector::new(shape)],
    );
    for i in 0..3_000u64 {
        let outcome = if i % 7 == 0 {
            Outcome::Limited
        } else {
            Outcome::Admitted
        };
        let mut s = sample(0, (i % 2) as usize, i * 2, outcome);
        // Latencies spread over three orders of magnitude, different in each second.
        s.latency = Duration::from_micros(100 + (i * i * 7919) % 200_000);
        s.service_time = s.latency / 2;
        whole.record(&s);
        halves[(i % 3 == 0) as usize].record(&s);
    }
    let whole = whole.snapshot();
    let mut merged = halves[0].snapshot();
    merged.add(&halves[1].snapshot()).unwrap();
    for n in 0..2 {
        for p in 0..2 {
            let (a, b) = (&whole.cells[0][n][p], &merged.cells[0][n][p]);
            assert_eq!(a.counts, b.counts);
            assert_eq!(a.latency, b.latency);
            assert_eq!(a.service_time, b.service_time);
        }
    }
    assert_eq!(
        whole.seconds, merged.seconds,
        "per-second counts and percentiles"
    );
    assert_eq!(whole.send_lag, merged.send_lag);
    assert_eq!(whole.second_latency.len(), merged.second_latency.len());
    for (a, b) in whole.second_latency[0]
        .iter()
        .zip(&merged.second_latency[0])
    {
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (x, y) in a.values().zip(b.values()) {
            assert_eq!(unpack(x).unwrap(), unpack(y).unwrap());
        }
    }
}

#[test]
fn measurements_of_different_shapes_do_not_add() {
    let shape = |tenants| Shape {
        targets: 1,
        tenants,
        phases: vec![(Duration::ZERO, Duration::from_secs(2))],
        duration: Duration::from_secs(2),
        longest_request: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
    };
    let mut one = Measured::empty(&shape(1));
    let e = one.add(&Measured::empty(&shape(2))).unwrap_err();
    assert!(matches!(e, MeasuredError::Shape(_)), "{e}");
}

#[test]
fn a_bulk_of_drops_counts_in_its_phase_and_second_at_once_and_not_as_sent() {
    let c = Collector::new(Shape {
        targets: 1,
        tenants: 1,
        phases: vec![(Duration::ZERO, Duration::from_secs(3))],
        duration: Duration::from_secs(3),
        longest_request: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
    });
    let backlog = Outcome::Dropped(DropCause::Backlog);
    c.record_repeated(&sample(0, 0, 1_200, backlog), 1_000_000);
    let m = c.snapshot();
    let cell = &m.cells[0][0][0];
    assert_eq!(
        (cell.counts.offered, cell.counts.dropped),
        (1_000_000, 1_000_000)
    );
    assert_eq!(cell.latency.len(), 1_000_000, "each at the request timeout");
    assert_eq!(m.seconds[0][0][1].counts.dropped, 1_000_000);
    assert_eq!(m.seconds[0][1][1].counts.dropped, 1_000_000, "all tenants");
    assert_eq!(c.live(0).dropped.load(Ordering::Relaxed), 1_000_000);
    assert_eq!(c.live(0).done.load(Ordering::Relaxed), 0);
}
