//! The text bundle format, used for preprocessed sources, LLVM IR text,
//! assembly and dependency files. Each entry is wrapped in marker lines
//! that are comments in the file's language:
//!
//! ```text
//! \n<C> __CLANG_OFFLOAD_BUNDLE____START__ <ID>\n
//! <payload verbatim>
//! \n<C> __CLANG_OFFLOAD_BUNDLE____END__ <ID>\n
//! ```
//! where `<C>` is `//`, `#` or `;`. Markers are searched with their leading
//! newline, so a START marker at offset 0 is not one; text outside entries is
//! ignored.

use super::BundleError;
use crate::plan::Plan;

const MAGIC: &str = "__CLANG_OFFLOAD_BUNDLE__";

/// The marker strings for one comment prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Markers {
    start: Vec<u8>,
    end: Vec<u8>,
}

impl Markers {
    /// The markers for the line-comment token `comment` (`//`, `#`, `;`).
    pub fn new(comment: &str) -> Markers {
        Markers {
            start: format!("\n{comment} {MAGIC}__START__ ").into_bytes(),
            end: format!("\n{comment} {MAGIC}__END__ ").into_bytes(),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    memchr::memmem::find(haystack.get(from..)?, needle).map(|i| i + from)
}

/// Writes entries in the given order.
pub fn write<'a>(markers: &Markers, entries: &[(&[u8], &'a [u8])]) -> Plan<'a> {
    let mut plan = Plan::new();
    for (id, payload) in entries {
        let mut start = markers.start.clone();
        start.extend_from_slice(id);
        start.push(b'\n');
        plan.own(start);
        plan.borrow(payload);
        let mut end = markers.end.clone();
        end.extend_from_slice(id);
        end.push(b'\n');
        plan.own(end);
    }
    plan
}

/// A cursor over a text bundle that moves exactly as LLVM's reader does, so
/// that which entries are seen (nested or malformed ones included) matches.
pub struct TextReader<'a> {
    data: &'a [u8],
    markers: Markers,
    pos: usize,
    /// Offset of the current entry's START marker, for diagnostics.
    current: Option<(usize, &'a [u8])>,
}

impl<'a> TextReader<'a> {
    /// A reader at the start of `data`, for markers in `comment` syntax.
    pub fn new(data: &'a [u8], comment: &str) -> Self {
        TextReader { data, markers: Markers::new(comment), pos: 0, current: None }
    }

    /// Finds the next START marker and returns its ID. The cursor stays just
    /// after the START line; an entry whose payload is not read is skipped
    /// only by that much.
    pub fn next_id(&mut self) -> Option<&'a [u8]> {
        let at = find(self.data, &self.markers.start, self.pos)?;
        let id_start = at + self.markers.start.len();
        let id_end = find(self.data, b"\n", id_start)?;
        self.pos = id_end + 1;
        let id = &self.data[id_start..id_end];
        self.current = Some((at, id));
        Some(id)
    }

    fn missing_end(&self) -> BundleError {
        let (offset, id) = self.current.unwrap_or((self.pos, b""));
        BundleError::MissingEndMarker { id: String::from_utf8_lossy(id).into_owned(), offset: offset as u64 }
    }

    /// Returns the current entry's payload (up to the next END marker) and
    /// moves past the END line.
    pub fn payload(&mut self) -> Result<&'a [u8], BundleError> {
        let start = self.pos;
        let end = find(self.data, &self.markers.end, start).ok_or_else(|| self.missing_end())?;
        self.pos = end;
        self.skip_end_line();
        Ok(&self.data[start..end])
    }

    /// Moves past the current entry without reading it (what `-list` does).
    pub fn skip_entry(&mut self) -> Result<(), BundleError> {
        self.payload().map(|_| ())
    }

    fn skip_end_line(&mut self) {
        // The cursor is on the END marker's leading newline.
        self.pos = match find(self.data, b"\n", self.pos + 1) {
            Some(nl) => nl + 1,
            None => self.data.len(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(comment: &str, entries: &[(&str, &str)]) -> Vec<u8> {
        let m = Markers::new(comment);
        let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(a, b)| (a.as_bytes(), b.as_bytes())).collect();
        write(&m, &e).to_vec()
    }

    fn read_all(data: &[u8], comment: &str) -> Result<Vec<(String, String)>, BundleError> {
        let mut r = TextReader::new(data, comment);
        let mut out = Vec::new();
        while let Some(id) = r.next_id() {
            let id = String::from_utf8_lossy(id).into_owned();
            out.push((id, String::from_utf8_lossy(r.payload()?).into_owned()));
        }
        Ok(out)
    }

    /// docs/formats/bundle.md §10 case 27.
    #[test]
    fn exact_layout_and_round_trip() {
        let entries = [("host-x", "host line1\nhost line2\n"), ("openmp-y", "dev1 no newline"), ("hip-z", "")];
        let b = bundle("//", &entries);
        let expected = "\n// __CLANG_OFFLOAD_BUNDLE____START__ host-x\nhost line1\nhost line2\n\
                        \n// __CLANG_OFFLOAD_BUNDLE____END__ host-x\n\
                        \n// __CLANG_OFFLOAD_BUNDLE____START__ openmp-y\ndev1 no newline\
                        \n// __CLANG_OFFLOAD_BUNDLE____END__ openmp-y\n\
                        \n// __CLANG_OFFLOAD_BUNDLE____START__ hip-z\n\
                        \n// __CLANG_OFFLOAD_BUNDLE____END__ hip-z\n";
        assert_eq!(String::from_utf8(b.clone()).unwrap(), expected);
        let back = read_all(&b, "//").unwrap();
        assert_eq!(back, entries.map(|(a, b)| (a.to_string(), b.to_string())));
    }

    /// Case 29: text around the markers is ignored.
    #[test]
    fn garbage_between_entries_is_ignored() {
        let text = "PRE\n; __CLANG_OFFLOAD_BUNDLE____START__ a\nA\nB\n; __CLANG_OFFLOAD_BUNDLE____END__ a\nMID\n\
                    \n; __CLANG_OFFLOAD_BUNDLE____START__ b\nC\n; __CLANG_OFFLOAD_BUNDLE____END__ b\nPOST";
        let back = read_all(text.as_bytes(), ";").unwrap();
        assert_eq!(back, [("a".to_string(), "A\nB".to_string()), ("b".to_string(), "C".to_string())]);
    }

    /// Case 30: a START marker at offset 0 has no leading newline.
    #[test]
    fn marker_at_offset_zero_is_not_found() {
        let text = "# __CLANG_OFFLOAD_BUNDLE____START__ a\nA\n# __CLANG_OFFLOAD_BUNDLE____END__ a\n";
        assert!(read_all(text.as_bytes(), "#").unwrap().is_empty());
    }

    #[test]
    fn unterminated_entries_are_errors() {
        let text = "\n# __CLANG_OFFLOAD_BUNDLE____START__ a\nA";
        assert!(matches!(read_all(text.as_bytes(), "#"), Err(BundleError::MissingEndMarker { offset: 0, .. })));
        // A START line without a newline ends the scan.
        let text = "\n# __CLANG_OFFLOAD_BUNDLE____START__ a";
        assert!(read_all(text.as_bytes(), "#").unwrap().is_empty());
    }

    #[test]
    fn other_comment_prefixes_are_not_markers() {
        let b = bundle(";", &[("a", "x")]);
        assert!(read_all(&b, "//").unwrap().is_empty());
        assert_eq!(read_all(&b, ";").unwrap().len(), 1);
    }

    #[test]
    fn substring_search() {
        assert_eq!(find(b"aaab", b"ab", 0), Some(2));
        assert_eq!(find(b"aaab", b"ab", 3), None);
        assert_eq!(find(b"xyz", b"z", 5), None);
    }
}
