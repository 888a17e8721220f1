//! Placing what the scanner found in a member back in the package: the
//! member's steps go in front of every location, and offsets become
//! absolute in the input (or unknown, for a decompressed member).

use crate::{Inventory, Location, Step};

/// Rewrites `inv`, found by scanning a member reached by `prefix` whose
/// bytes start at `base` in the input (`None`: decompressed, so nothing in
/// it has an offset in the input).
pub fn rebase(inv: &mut Inventory<'_>, prefix: &[Step], base: Option<u64>) {
    let shift = |offset: Option<u64>| base.and_then(|b| b.checked_add(offset?));
    for o in &mut inv.objects {
        o.location = prefixed(prefix, &o.location);
        o.offset = shift(o.offset);
    }
    for u in &mut inv.units {
        u.location = prefixed(prefix, &u.location);
    }
    if prefix.is_empty() && base == Some(0) {
        return;
    }
    let outer = Location(prefix.to_vec()).to_string();
    for d in &mut inv.diagnostics {
        // The scanner writes `file` for the member itself.
        d.location = match d.location.strip_prefix("file") {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => format!("{outer}{rest}"),
            _ => format!("{outer} {}", d.location),
        };
        if base.is_none()
            && let Some(at) = d.offset
        {
            d.message = format!("{} (at {at:#x} in the decompressed member)", d.message);
        }
        d.offset = shift(d.offset);
    }
}

fn prefixed(prefix: &[Step], loc: &Location) -> Location {
    let mut steps = prefix.to_vec();
    steps.extend(loc.0.iter().cloned());
    Location(steps)
}
