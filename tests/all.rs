//! The integration suite: one test binary (fast to link, shared helpers).
//! Every test makes its own manager instance and temp dirs, so they run in
//! parallel. Docker tests talk to the real engine and fail loudly without one.

mod common;
mod suite;
