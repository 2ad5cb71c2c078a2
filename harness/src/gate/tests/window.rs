//! Worst-window gates, against series whose every second the test writes.

use super::{gates, run, second_row};
use crate::gate::{Actual, evaluate};
use crate::metrics::Counts;
use crate::results::read::SeriesRow;

/// The fault phase (10 s to 40 s) of the reference, second by second: acme's counts from
/// `acme(second)`, globex 20 offered and 20 admitted.
fn fault_seconds(acme: impl Fn(u64) -> Counts) -> Vec<SeriesRow> {
    (10..40)
        .flat_map(|s| {
            let mut a = second_row("reference", "acme", s, (0, 0), 1_000);
            a.counts = acme(s);
            [a, second_row("reference", "globex", s, (20, 20), 1_000)]
        })
        .collect()
}

fn answered(admitted: u64, limited: u64, unavailable: u64) -> Counts {
    Counts {
        offered: admitted + limited + unavailable,
        admitted,
        limited,
        unavailable,
        ..Counts::default()
    }
}

/// The first check of `text`'s gates on the reference (gates on `target = "reference"`).
fn actual(text: &str, series: &[SeriesRow]) -> (Actual, bool) {
    let checks = evaluate(&run(), series, &gates(text).unwrap()).unwrap();
    let c = checks
        .into_iter()
        .find(|c| c.target == "reference")
        .unwrap();
    (c.actual, c.passed)
}

#[test]
fn five_seconds_of_503_fail_a_worst_window_gate_that_the_phase_share_passes() {
    // acme: 120 a second, every one 503 from 20 s to 25 s, else 50 admitted and 70 refused.
    let series = fault_seconds(|s| {
        if (20..25).contains(&s) {
            answered(0, 0, 120)
        } else {
            answered(50, 70, 0)
        }
    });
    let gate = |window: &str| {
        format!(
            "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"rate_5xx\"\n\
             tenant = \"acme\"\nmax = 0.5\n{window}"
        )
    };
    assert_eq!(
        actual(&gate("window = \"5s\""), &series),
        (Actual::Value(1.0), false)
    );
    // Six seconds always take in one second of 429s with the five of 503s.
    let (six, passed) = actual(&gate("window = \"6s\""), &series);
    assert_eq!((six, passed), (Actual::Value(5.0 / 6.0), false));
    // The same 503s over the whole phase (the phase's figure): 5 of 30 seconds.
    let phase = gate("window = \"30s\"");
    assert_eq!(actual(&phase, &series), (Actual::Value(5.0 / 30.0), true));
}

#[test]
fn a_windows_over_admission_is_judged_against_the_windows_own_allowance_and_slack() {
    // acme is admitted 50 a second (the limit), and 100 in each of 30 s and 31 s.
    let series = fault_seconds(|s| {
        let admitted = if s == 30 || s == 31 { 100 } else { 50 };
        answered(admitted, 120 - admitted, 0)
    });
    let gate = |metric: &str| {
        format!(
            "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"{metric}\"\n\
             tenant = \"acme\"\nmax = 0.1\nwindow = \"2s\""
        )
    };
    // Two seconds allow 100; the burst's window admitted 200.
    assert_eq!(
        actual(&gate("over_admission"), &series),
        (Actual::Value(1.0), false)
    );
    // Beyond the slack a window of two seconds gives a correct limiter (three fixed windows
    // of 50 touched: 150 − 100 = 50): (200 − 100 − 50) ÷ 100.
    assert_eq!(
        actual(&gate("over_admission_beyond_window"), &series),
        (Actual::Value(0.5), false)
    );
}

#[test]
fn a_minimum_over_windows_is_judged_by_the_lowest_window() {
    // acme is served 50 of 120 every second but 35 s, when it is served none.
    let series = fault_seconds(|s| {
        let admitted = if s == 35 { 0 } else { 50 };
        answered(admitted, 120 - admitted, 0)
    });
    let text = "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"rate_2xx\"\n\
                tenant = \"acme\"\nmin = 0.3\nwindow = \"2s\"";
    let (lowest, passed) = actual(text, &series);
    assert_eq!(lowest, Actual::Value(50.0 / 240.0));
    assert!(!passed);
}

#[test]
fn all_tenants_together_sum_every_tenants_counts_in_the_window() {
    let series = fault_seconds(|s| {
        if s == 12 {
            answered(0, 0, 120)
        } else {
            answered(50, 70, 0)
        }
    });
    let text = "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"count_5xx\"\n\
                max = 0\nwindow = \"3s\"";
    assert_eq!(actual(text, &series), (Actual::Value(120.0), false));
    let share = text.replace("count_5xx", "rate_5xx");
    // acme's 120 and globex's 20 in second 12; 140 a second in the window's other two.
    assert_eq!(
        actual(&share, &series),
        (Actual::Value(120.0 / 420.0), false)
    );
}

#[test]
fn windows_nothing_was_due_in_are_passed_over_and_a_phase_of_none_is_not_measured() {
    // Nothing was due from 10 s to 30 s (no rows: no request); then 429s only.
    let mut series = fault_seconds(|_| answered(50, 70, 0));
    series.retain(|r| r.second >= 30);
    let text = "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"rate_429\"\n\
                tenant = \"acme\"\nmax = 0.9\nwindow = \"5s\"";
    assert_eq!(actual(text, &series), (Actual::Value(70.0 / 120.0), true));

    let (none, passed) = actual(text, &[]);
    assert!(
        matches!(&none, Actual::NotMeasured(why) if why.contains("any 5 s window")),
        "{none:?}"
    );
    assert!(!passed, "a gate never passes on nothing");
}

#[test]
fn a_window_whose_requests_were_all_dropped_is_not_measured_and_fails_the_gate() {
    // 20 s to 25 s: every request of acme's due, none sent (the generator dropped them all).
    let series = fault_seconds(|s| {
        if (20..25).contains(&s) {
            Counts {
                offered: 120,
                dropped: 120,
                ..Counts::default()
            }
        } else {
            answered(50, 70, 0)
        }
    });
    let text = "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"rate_5xx\"\n\
                tenant = \"acme\"\nmax = 0.5\nwindow = \"5s\"";
    let (a, passed) = actual(text, &series);
    assert!(
        matches!(&a, Actual::NotMeasured(why) if why.starts_with("the window 20–25 s")),
        "{a:?}"
    );
    assert!(!passed);
    // Its drops are counted all the same: a count is known without a request sent.
    let dropped = text.replace("rate_5xx", "count_dropped");
    assert_eq!(actual(&dropped, &series), (Actual::Value(600.0), false));
}

#[test]
fn a_phase_shorter_than_its_window_is_not_measured_and_fails_either_bound() {
    let series = fault_seconds(|_| answered(50, 70, 0));
    for bound in ["max = 1.0", "min = 0.0"] {
        let text = format!(
            "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"rate_429\"\n\
             {bound}\nwindow = \"31s\""
        );
        let (a, passed) = actual(&text, &series);
        assert!(
            matches!(&a, Actual::NotMeasured(why) if why.contains("30 whole seconds")),
            "{a:?}"
        );
        assert!(!passed);
    }
}
