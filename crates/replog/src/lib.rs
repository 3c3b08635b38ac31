//! Replicated partition log (work in progress).
