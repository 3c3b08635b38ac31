//! Hierarchical timing wheel (work in progress).
