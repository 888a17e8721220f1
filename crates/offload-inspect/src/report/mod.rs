//! Summaries over what [`crate::scan`] finds, for `offload size`
//! (bytes per target and offload kind, and what `prune --keep` would save)
//! and `offload diff` (code objects added, removed and changed between two
//! versions). Pure aggregation: the caller walks files and packages and
//! hands each scanned item here.

pub mod diff;
pub mod size;

#[cfg(test)]
mod tests;
