//! `failmode-oracle`: a scripted test target whose every answer is known in advance, to prove
//! failmode's own verdicts. It shares no code with the harness: HTTP is their only contract.

pub mod decide;
pub mod script;
pub mod windows;
