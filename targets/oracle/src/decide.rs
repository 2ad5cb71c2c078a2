//! The decision: what the oracle answers one caller's request at time t since t0, and after
//! how long.
//!
//! The segment holding at t gives the verdict and the delay; whatever it leaves out (and
//! every time outside all segments) takes the defaults: `limit FAILMODE_LIMIT/FAILMODE_WINDOW`
//! and the base delay `FAILMODE_ORACLE_DELAY_MS`. The decision is taken when the request
//! arrives; a delay then holds the answer (or the hang-up), it does not move the decision.
//!
//! [`Decider`] is pure, time passed in, for tests; [`Oracle`] shares it between connections
//! and owns the clock: t0 is the first decision it is asked for.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::script::{Limit, Script, Verdict};
use crate::windows::FixedWindows;

/// What the request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200 under a limit.
    Admitted,
    /// 429 under a limit, with the time until the caller's window ends.
    Limited { retry_after: Duration },
    /// 200 from `open`.
    Open,
    /// `status CODE`.
    Status(u16),
    /// Close the connection without answering.
    Drop,
}

impl Answer {
    /// The HTTP status it answers with; `None` for a dropped connection.
    pub fn status(self) -> Option<u16> {
        match self {
            Self::Admitted | Self::Open => Some(200),
            Self::Limited { .. } => Some(429),
            Self::Status(code) => Some(code),
            Self::Drop => None,
        }
    }

    /// Its name in `/metrics` and in answers.
    pub fn label(self) -> &'static str {
        match self {
            Self::Admitted => "admitted",
            Self::Limited { .. } => "limited",
            Self::Open => "open",
            Self::Status(_) => "status",
            Self::Drop => "dropped",
        }
    }
}

/// One request's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// When it arrived, since t0.
    pub t: Duration,
    pub answer: Answer,
    /// How long to hold the answer.
    pub delay: Duration,
}

/// What holds outside every segment, and in a segment that leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    pub limit: Limit,
    pub delay: Duration,
}

/// The script, the defaults and the windows' counts: decisions from times passed in.
#[derive(Debug)]
pub struct Decider {
    script: Script,
    defaults: Defaults,
    windows: FixedWindows,
}

impl Decider {
    pub fn new(script: Script, defaults: Defaults) -> Self {
        Self {
            script,
            defaults,
            windows: FixedWindows::default(),
        }
    }

    /// Decides `caller`'s request at `t` since t0. Times must not decrease from one call to
    /// the next (the windows prune what has ended).
    pub fn decide(&mut self, t: Duration, caller: &str) -> Decision {
        let actions = self.script.at(t).map(|s| s.actions).unwrap_or_default();
        let verdict = actions
            .verdict
            .unwrap_or(Verdict::Limit(self.defaults.limit));
        let answer = match verdict {
            Verdict::Limit(limit) => match self.windows.admit(t, caller, limit) {
                Ok(()) => Answer::Admitted,
                Err(retry_after) => Answer::Limited { retry_after },
            },
            Verdict::Open => Answer::Open,
            Verdict::Status(code) => Answer::Status(code),
            Verdict::Drop => Answer::Drop,
        };
        Decision {
            t,
            answer,
            delay: actions.delay.unwrap_or(self.defaults.delay),
        }
    }
}

/// The decider shared by every connection, and its clock.
#[derive(Debug)]
pub struct Oracle {
    state: Mutex<State>,
    lead: Duration,
}

#[derive(Debug)]
struct State {
    /// `None` until the first decision.
    t0: Option<Instant>,
    decider: Decider,
}

impl Oracle {
    /// An oracle whose t0 will be `lead` before its first decision.
    pub fn new(decider: Decider, lead: Duration) -> Self {
        Self {
            state: Mutex::new(State { t0: None, decider }),
            lead,
        }
    }

    /// Decides `caller`'s request now (`now` is `Instant::now` outside tests); the first call
    /// sets t0, `lead` before it. The clock is read under the lock, so times reach the windows
    /// in order and two requests racing across a window's end cannot both find it fresh.
    pub fn decide(&self, caller: &str, now: impl FnOnce() -> Instant) -> Decision {
        // A panic under the lock leaves counts that are still counts: carry on with them.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = now();
        let lead = self.lead;
        let t0 = *state
            .t0
            .get_or_insert_with(|| now.checked_sub(lead).unwrap_or(now));
        state
            .decider
            .decide(now.saturating_duration_since(t0), caller)
    }

    /// Time since t0, if it has started.
    pub fn elapsed(&self, now: Instant) -> Option<Duration> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.t0.map(|t0| now.saturating_duration_since(t0))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn decider(script: &str, admits: u32) -> Decider {
        Decider::new(
            script.parse().unwrap(),
            Defaults {
                limit: Limit {
                    admits,
                    window: Duration::from_secs(1),
                },
                delay: Duration::from_millis(5),
            },
        )
    }

    /// The answers to `per_s` requests a second from one caller, `from` to `to` seconds.
    fn answers(d: &mut Decider, from: f64, to: f64, per_s: u32) -> Vec<Answer> {
        let n = ((to - from) * f64::from(per_s)).round() as u32;
        (0..n)
            .map(|i| {
                d.decide(secs(from + f64::from(i) / f64::from(per_s)), "acme")
                    .answer
            })
            .collect()
    }

    fn count(answers: &[Answer], label: &str) -> usize {
        answers.iter().filter(|a| a.label() == label).count()
    }

    #[test]
    fn outside_every_segment_the_default_limit_and_delay_hold() {
        let mut d = decider("", 50);
        let all = answers(&mut d, 0.0, 3.0, 120);
        assert_eq!(count(&all, "admitted"), 150);
        assert_eq!(count(&all, "limited"), 210);
        assert_eq!(
            d.decide(secs(3.5), "globex").delay,
            Duration::from_millis(5)
        );
    }

    #[test]
    fn an_open_cut_admits_everything_inside_it_only() {
        let mut d = decider("2..4: open", 50);
        assert_eq!(count(&answers(&mut d, 0.0, 2.0, 120), "admitted"), 100);
        let cut = answers(&mut d, 2.0, 4.0, 120);
        assert_eq!(count(&cut, "open"), 240);
        assert_eq!(count(&answers(&mut d, 4.0, 6.0, 120), "admitted"), 100);
    }

    #[test]
    fn a_status_cut_answers_its_code_and_keeps_the_default_delay() {
        let mut d = decider("2..4: status 500", 50);
        let at_3 = d.decide(secs(3.0), "acme");
        assert_eq!(at_3.answer, Answer::Status(500));
        assert_eq!(at_3.answer.status(), Some(500));
        assert_eq!(at_3.delay, Duration::from_millis(5));
        assert_eq!(d.decide(secs(4.0), "acme").answer, Answer::Admitted);
    }

    #[test]
    fn a_delay_only_segment_keeps_the_default_limit() {
        let mut d = decider("3..4: delay 2000; 5..6: delay 2000", 1);
        let at = |d: &mut Decider, t: f64| d.decide(secs(t), "acme");
        assert_eq!(at(&mut d, 2.9).delay, Duration::from_millis(5));
        let slow = at(&mut d, 3.0);
        assert_eq!((slow.answer, slow.delay), (Answer::Admitted, secs(2.0)));
        let slow_refused = at(&mut d, 3.5);
        assert_eq!(slow_refused.delay, secs(2.0));
        assert_eq!(
            slow_refused.answer,
            Answer::Limited {
                retry_after: secs(0.5)
            }
        );
        assert_eq!(at(&mut d, 4.0).delay, Duration::from_millis(5));
        assert_eq!(at(&mut d, 5.999).delay, secs(2.0));
    }

    #[test]
    fn a_drop_cut_drops_and_a_delay_beside_it_holds_the_hang_up() {
        let mut d = decider("2..4: drop; 4..5: drop, delay 300", 50);
        assert_eq!(d.decide(secs(1.0), "acme").answer, Answer::Admitted);
        assert_eq!(d.decide(secs(2.0), "acme").answer, Answer::Drop);
        assert_eq!(d.decide(secs(2.0), "acme").answer.status(), None);
        let late = d.decide(secs(4.5), "acme");
        assert_eq!((late.answer, late.delay), (Answer::Drop, secs(0.3)));
    }

    #[test]
    fn a_scripted_limit_replaces_the_default_inside_its_segment() {
        let mut d = decider("1..2: limit 3/250ms", 50);
        let cut = answers(&mut d, 1.0, 2.0, 100);
        assert_eq!(
            count(&cut, "admitted"),
            12,
            "3 in each of four 250 ms windows"
        );
    }

    #[test]
    fn the_oracle_starts_its_clock_at_the_first_decision() {
        let oracle = Oracle::new(decider("1..2: status 503", 1), Duration::ZERO);
        let start = Instant::now() + Duration::from_secs(10);
        assert_eq!(oracle.elapsed(start), None);
        let first = oracle.decide("acme", || start);
        assert_eq!((first.t, first.answer), (Duration::ZERO, Answer::Admitted));
        let later = oracle.decide("acme", || start + secs(1.5));
        assert_eq!((later.t, later.answer), (secs(1.5), Answer::Status(503)));
        assert_eq!(oracle.elapsed(start + secs(3.0)), Some(secs(3.0)));
    }

    #[test]
    fn a_lead_sets_t0_before_the_first_decision() {
        // An arrival scheduled 1 s after the first, delivered 0.2 ms sooner than it, still
        // falls in second 1.
        let oracle = Oracle::new(decider("1..2: status 503", 1), Duration::from_millis(3));
        let start = Instant::now() + Duration::from_secs(10);
        let first = oracle.decide("acme", || start);
        assert_eq!(first.t, Duration::from_millis(3));
        let early = oracle.decide("globex", || start + secs(0.9998));
        assert_eq!(early.answer, Answer::Status(503));
    }
}
