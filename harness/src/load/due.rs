//! A sender's arrivals not yet dispatched, in the order they fall due, merged from its
//! streams' schedules; and, before the dispatcher sleeps, the first one due after its wake-up,
//! so that the [`Pacer`](super::pacer::Pacer) can arm the sleep after next ahead.
//!
//! Looking ahead takes arrivals from the schedules before they are dispatched. Each keeps the
//! index its schedule gave it, so its caller key is drawn for it and not for whichever arrival
//! its schedule produced last.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use super::schedule::Schedule;
use super::stream::Stream;

/// One arrival of one of the sender's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Scheduled {
    /// When it is due, from the start. First, so arrivals order by it.
    pub(super) offset: Duration,
    /// Which of the sender's streams.
    pub(super) stream: usize,
    /// Its index in the stream's whole schedule (every worker's arrivals counted).
    pub(super) index: u64,
}

/// Where the arrivals come from: the sender's streams (a schedule each, by position).
pub(super) trait Schedules {
    fn streams(&self) -> usize;

    fn schedule(&mut self, stream: usize) -> &mut Schedule;

    /// The stream's next arrival.
    fn next_of(&mut self, stream: usize) -> Option<Scheduled> {
        let schedule = self.schedule(stream);
        schedule.next().map(|offset| Scheduled {
            offset,
            stream,
            index: schedule.last_index(),
        })
    }
}

impl Schedules for [Stream] {
    fn streams(&self) -> usize {
        self.len()
    }

    fn schedule(&mut self, stream: usize) -> &mut Schedule {
        &mut self[stream].schedule
    }
}

/// Every arrival in `taken` is due no later than any in `heads`, and `heads` holds the latest
/// arrival each stream's schedule produced (none once it is done), so a schedule's position
/// is always just after its stream's entry in `heads`.
#[derive(Debug)]
pub(super) struct Due {
    heads: BinaryHeap<Reverse<Scheduled>>,
    /// Taken from `heads` by a look ahead, in due order.
    taken: VecDeque<Scheduled>,
}

impl Due {
    pub(super) fn new(schedules: &mut (impl Schedules + ?Sized)) -> Self {
        Self {
            heads: (0..schedules.streams())
                .filter_map(|i| schedules.next_of(i))
                .map(Reverse)
                .collect(),
            taken: VecDeque::new(),
        }
    }

    /// When the next arrival is due.
    pub(super) fn peek(&self) -> Option<Duration> {
        self.taken
            .front()
            .or(self.heads.peek().map(|Reverse(head)| head))
            .map(|s| s.offset)
    }

    /// The next arrival, if it is due by `now` (an offset).
    pub(super) fn pop_due(
        &mut self,
        now: Duration,
        schedules: &mut (impl Schedules + ?Sized),
    ) -> Option<Scheduled> {
        if self.peek()? > now {
            return None;
        }
        if let Some(taken) = self.taken.pop_front() {
            return Some(taken);
        }
        let Reverse(head) = self.heads.pop()?;
        if let Some(after) = schedules.next_of(head.stream) {
            self.heads.push(Reverse(after));
        }
        Some(head)
    }

    /// When the first arrival due after `at` is due, looking past at most `most` arrivals due
    /// by then (None beyond them, or if no arrival is left after `at`).
    pub(super) fn first_after(
        &mut self,
        at: Duration,
        most: usize,
        schedules: &mut (impl Schedules + ?Sized),
    ) -> Option<Duration> {
        while let Some(&Reverse(head)) = self.heads.peek()
            && head.offset <= at
        {
            if self.taken.len() >= most {
                return None;
            }
            self.heads.pop();
            self.taken.push_back(head);
            if let Some(after) = schedules.next_of(head.stream) {
                self.heads.push(Reverse(after));
            }
        }
        self.heads.peek().map(|Reverse(head)| head.offset)
    }

    /// The next arrival taken ahead, if it is due before `until`; its schedule is already past
    /// it.
    pub(super) fn pop_taken_before(&mut self, until: Duration) -> Option<Scheduled> {
        if self.taken.front()?.offset < until {
            self.taken.pop_front()
        } else {
            None
        }
    }

    /// The next arrival left in the schedules' heads, if it is due before `until`, without
    /// producing its stream's next: the caller skips its schedule on and [`Self::push`]es
    /// what follows.
    pub(super) fn pop_head_before(&mut self, until: Duration) -> Option<Scheduled> {
        if !self.taken.is_empty() || self.heads.peek()?.0.offset >= until {
            return None;
        }
        self.heads.pop().map(|Reverse(head)| head)
    }

    /// A stream's latest arrival, after [`Self::pop_head_before`].
    pub(super) fn push(&mut self, head: Scheduled) {
        self.heads.push(Reverse(head));
    }

    /// The arrivals taken ahead, and each stream's next (its schedule positioned after it).
    pub(super) fn into_parts(self) -> (usize, impl Iterator<Item = Scheduled>) {
        (self.taken.len(), self.heads.into_iter().map(|Reverse(s)| s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Arrival;

    impl Schedules for [Schedule] {
        fn streams(&self) -> usize {
            self.len()
        }

        fn schedule(&mut self, stream: usize) -> &mut Schedule {
            &mut self[stream]
        }
    }

    fn schedules() -> Vec<Schedule> {
        let secs = Duration::from_secs(1);
        vec![
            Schedule::new(7, 0, 0, 300.0, Arrival::Poisson, secs),
            Schedule::new(7, 0, 1, 170.0, Arrival::Uniform, secs),
            Schedule::new(7, 1, 0, 45.0, Arrival::Poisson, secs),
        ]
    }

    fn drain(due: &mut Due, schedules: &mut [Schedule]) -> Vec<Scheduled> {
        std::iter::from_fn(|| due.pop_due(Duration::MAX, schedules)).collect()
    }

    #[test]
    fn arrivals_come_in_due_order_each_with_its_index_in_its_stream() {
        let mut s = schedules();
        let mut due = Due::new(&mut s[..]);
        let all = drain(&mut due, &mut s);
        assert!(all.is_sorted());
        assert!(all.len() > 400);
        for stream in 0..3 {
            let indexes: Vec<u64> = all
                .iter()
                .filter(|a| a.stream == stream)
                .map(|a| a.index)
                .collect();
            assert_eq!(indexes, (0..indexes.len() as u64).collect::<Vec<_>>());
        }
        let offsets: Vec<Duration> = schedules()[1].clone().collect();
        let uniform: Vec<Duration> = all
            .iter()
            .filter(|a| a.stream == 1)
            .map(|a| a.offset)
            .collect();
        assert_eq!(uniform, offsets);
    }

    #[test]
    fn looking_ahead_finds_the_first_arrival_after_and_changes_nothing_dispatched() {
        let mut s = schedules();
        let mut plain = Due::new(&mut s[..]);
        let expected = drain(&mut plain, &mut s);

        let mut s = schedules();
        let mut due = Due::new(&mut s[..]);
        let mut got = Vec::new();
        let mut at = Duration::ZERO;
        while due.peek().is_some() {
            at += Duration::from_micros(1_300);
            let after = due.first_after(at, 256, &mut s[..]);
            let first_after = expected.iter().find(|a| a.offset > at).map(|a| a.offset);
            assert_eq!(after, first_after, "at {at:?}");
            got.extend(std::iter::from_fn(|| due.pop_due(at, &mut s[..])));
            assert!(due.peek().is_none_or(|next| next > at));
        }
        assert_eq!(got, expected);
    }

    #[test]
    fn a_look_ahead_stops_at_its_most_and_says_so() {
        let mut s = schedules();
        let mut due = Due::new(&mut s[..]);
        let at = Duration::from_millis(500);
        assert_eq!(due.first_after(at, 10, &mut s[..]), None);
        let (taken, heads) = due.into_parts();
        assert_eq!(taken, 10);
        assert_eq!(heads.count(), 3);
    }

    #[test]
    fn dropping_takes_what_was_taken_ahead_first_then_the_heads() {
        let mut s = schedules();
        let mut due = Due::new(&mut s[..]);
        let at = Duration::from_millis(20);
        due.first_after(at, 256, &mut s[..]);
        let until = Duration::from_millis(30);
        assert!(due.pop_head_before(until).is_none(), "taken ones first");
        let taken: Vec<Scheduled> = std::iter::from_fn(|| due.pop_taken_before(until)).collect();
        assert!(!taken.is_empty() && taken.iter().all(|a| a.offset <= at));
        let head = due.pop_head_before(until).expect("a head before 30 ms");
        assert!(head.offset > at && head.offset < until);
        due.push(head);
        assert_eq!(due.peek(), Some(head.offset));
    }
}
