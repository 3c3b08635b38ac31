//! One module per workload. Each reads its flags, runs every implementation it applies to
//! and prints the result lines.

pub mod add_cancel;
pub mod churn;
pub mod expire;
pub mod purgatory;
pub mod scale;
