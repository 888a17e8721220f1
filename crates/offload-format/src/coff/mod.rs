//! COFF objects: adding and removing sections (placeholder).

use crate::elf::NewSection;
use crate::plan::Plan;

/// Why a COFF file cannot be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoffError {
    #[error("malformed COFF file: {0}")]
    Malformed(String),
    #[error("cannot rewrite this COFF file: {0}")]
    Unsupported(String),
}

pub fn rewrite<'a>(
    _input: &'a [u8],
    _remove: &dyn Fn(&[u8]) -> bool,
    _add: Vec<NewSection<'a>>,
) -> Result<Plan<'a>, CoffError> {
    Err(CoffError::Unsupported("not implemented".into()))
}
