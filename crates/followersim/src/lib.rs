//! Follower simulator (work in progress).
