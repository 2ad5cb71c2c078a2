//! The BRIEF's metric definitions, as pure functions of counts.
//!
//! - `allowance` = limit ÷ window × phase length
//! - `entitled` = min(offered, allowance): what a perfect limiter admits (offered counts what
//!   the tenant's client let itself send: its own adaptive throttling is not the limiter's)
//! - over-admission = max(0, admitted − allowance) / allowance
//! - wrongful denial = max(0, entitled − admitted) / entitled
//! - over-admission beyond the window slack = max(0, admitted − allowance − slack) / allowance,
//!   slack = limit × (⌈length ÷ window⌉ + 1) − allowance: a phase touches at most
//!   ⌈length ÷ window⌉ + 1 fixed windows, which a limiter right in every window may each fill,
//!   so this stays 0 for a correct fixed or sliding window at any phase length (the slack is
//!   one window's limit for a phase of whole windows)

/// limit ÷ window × length, in requests.
pub fn allowance(limit: f64, window_s: f64, length_s: f64) -> f64 {
    limit / window_s * length_s
}

pub fn entitled(offered: u64, allowance: f64) -> f64 {
    (offered as f64).min(allowance)
}

/// The share of the allowance admitted on top of it (1.4 = 140 %).
pub fn over_admission(admitted: u64, allowance: f64) -> f64 {
    if allowance <= 0.0 {
        return 0.0;
    }
    (admitted as f64 - allowance).max(0.0) / allowance
}

/// What a limiter right in every window may admit beyond the allowance in a phase of
/// `length_s`: it touches at most ⌈length ÷ window⌉ + 1 fixed windows, each filled.
pub fn window_slack(limit: f64, window_s: f64, length_s: f64) -> f64 {
    // A hair under a whole number of windows counts as that number, not one more.
    let windows = (length_s / window_s - 1e-9).ceil().max(0.0) + 1.0;
    limit * windows - allowance(limit, window_s, length_s)
}

/// The share of the allowance admitted beyond it and `slack` ([`window_slack`]) on top.
pub fn over_admission_beyond(admitted: u64, allowance: f64, slack: f64) -> f64 {
    if allowance <= 0.0 {
        return 0.0;
    }
    (admitted as f64 - allowance - slack).max(0.0) / allowance
}

/// The share of what the caller was entitled to that it was refused (1.0 = 100 %).
pub fn wrongful_denial(admitted: u64, entitled: f64) -> f64 {
    if entitled <= 0.0 {
        return 0.0;
    }
    (entitled - admitted as f64).max(0.0) / entitled
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_running_example_of_the_brief() {
        // 50/s for a 30 s outage.
        let a = allowance(50.0, 1.0, 30.0);
        assert_eq!(a, 1500.0);
        // Fail open: acme's 120/s all admitted → 140 % over.
        assert!((over_admission(3600, a) - 1.4).abs() < 1e-12);
        // Fail closed: globex (20/s) gets nothing → 100 % wrongful denial.
        let globex = entitled(600, a);
        assert_eq!(globex, 600.0);
        assert_eq!(wrongful_denial(0, globex), 1.0);
        // Local share holds acme at 50/s: neither over nor wrongly denied.
        let acme = entitled(3600, a);
        assert_eq!(over_admission(1500, a), 0.0);
        assert_eq!(wrongful_denial(1500, acme), 0.0);
        // Acme pinned to one of four instances: 12.5/s → 75 % of its entitlement refused.
        assert!((wrongful_denial(375, acme) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn a_correct_limiter_in_a_phase_shorter_than_its_windows_line_up_with_takes_no_more_than_the_slack()
     {
        // Limit 10 a 2 s window, a 3 s phase: allowance 15; a window opening inside the phase
        // lets a limiter that is right in every window admit 20 (10 + 10).
        let a = allowance(10.0, 2.0, 3.0);
        assert_eq!(a, 15.0);
        assert!(over_admission(20, a) > 0.3);
        assert_eq!(over_admission_beyond(20, a, 10.0), 0.0);
        // Fail-open at 3 × the limit: 45 admitted, 20 beyond allowance and slack.
        assert!((over_admission_beyond(45, a, 10.0) - 20.0 / 15.0).abs() < 1e-12);
        assert_eq!(over_admission_beyond(5, 0.0, 10.0), 0.0);
    }

    #[test]
    fn the_slack_is_one_windows_limit_for_whole_windows_and_more_for_a_part_window() {
        assert_eq!(window_slack(50.0, 1.0, 30.0), 50.0);
        assert_eq!(window_slack(10.0, 1.0, 2.0), 10.0);
        // 1.5 s touches three 1 s windows: a fixed window right in each admits 30 of an
        // allowance of 15.
        assert_eq!(window_slack(10.0, 1.0, 1.5), 15.0);
        assert_eq!(
            over_admission_beyond(30, 15.0, window_slack(10.0, 1.0, 1.5)),
            0.0
        );
        // A phase shorter than its window touches two.
        assert_eq!(window_slack(10.0, 2.0, 0.5), 17.5);
    }

    #[test]
    fn nothing_offered_is_neither_over_nor_denied() {
        assert_eq!(wrongful_denial(0, entitled(0, 100.0)), 0.0);
        assert_eq!(over_admission(0, 0.0), 0.0);
    }

    proptest! {
        #[test]
        fn over_admission_and_wrongful_denial_never_both_positive(
            offered in 0u64..10_000, admitted_share in 0.0f64..=1.0, allowance in 1.0f64..5_000.0,
        ) {
            let admitted = (offered as f64 * admitted_share) as u64;
            let over = over_admission(admitted, allowance);
            let denied = wrongful_denial(admitted, entitled(offered, allowance));
            prop_assert!(over >= 0.0 && (0.0..=1.0).contains(&denied));
            prop_assert!(over == 0.0 || denied == 0.0);
        }
    }
}
