//! Output plans: a file described as a sequence of pieces, so writers never
//! copy payloads they can borrow. The CLI turns a borrowed piece that lies
//! inside a memory-mapped input into a kernel copy (`copy_file_range`).

use std::borrow::Cow;

/// One contiguous part of an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Bytes, usually a slice of an input.
    Bytes(Cow<'a, [u8]>),
    /// `len` copies of `byte` (alignment padding, zeros for uninitialized
    /// data, 0xcc after code): never held in memory.
    Fill {
        /// The byte repeated.
        byte: u8,
        /// How many times, in bytes.
        len: u64,
    },
}

impl Piece<'_> {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Piece::Bytes(b) => b.len() as u64,
            Piece::Fill { len, .. } => *len,
        }
    }
    /// Whether the piece has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The whole content of one output file.
///
/// ```
/// use offload_format::plan::Plan;
///
/// let header = [1u8, 2];
/// let mut plan = Plan::borrowed(&header);
/// plan.zeros(2);
/// plan.own(vec![9]);
/// assert_eq!(plan.len(), 5);
/// assert_eq!(plan.to_vec(), [1, 2, 0, 0, 9]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan<'a> {
    /// The pieces, in output order.
    pub pieces: Vec<Piece<'a>>,
}

impl<'a> Plan<'a> {
    /// An empty plan.
    pub fn new() -> Self {
        Plan { pieces: Vec::new() }
    }
    /// A plan that is exactly these borrowed bytes.
    pub fn borrowed(bytes: &'a [u8]) -> Self {
        let mut p = Plan::new();
        p.borrow(bytes);
        p
    }
    /// Appends borrowed bytes (nothing for an empty slice).
    pub fn borrow(&mut self, bytes: &'a [u8]) {
        if !bytes.is_empty() {
            self.pieces.push(Piece::Bytes(Cow::Borrowed(bytes)));
        }
    }
    /// Appends owned bytes (nothing for an empty vector).
    pub fn own(&mut self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.pieces.push(Piece::Bytes(Cow::Owned(bytes)));
        }
    }
    /// Appends `n` zero bytes.
    pub fn zeros(&mut self, n: u64) {
        self.fill(0, n);
    }
    /// Appends `len` copies of `byte`.
    pub fn fill(&mut self, byte: u8, len: u64) {
        if len > 0 {
            self.pieces.push(Piece::Fill { byte, len });
        }
    }
    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        self.pieces.iter().map(Piece::len).sum()
    }
    /// Whether the plan writes no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Materialises the plan (for tests, compression and small outputs).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(usize::try_from(self.len()).unwrap_or(0));
        self.append_to(&mut out);
        out
    }
    /// Materialises the plan, or `None` when its length cannot be
    /// allocated: for plans whose size comes from a file's header fields.
    pub fn try_to_vec(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        out.try_reserve_exact(usize::try_from(self.len()).ok()?).ok()?;
        self.append_to(&mut out);
        Some(out)
    }
    fn append_to(&self, out: &mut Vec<u8>) {
        for p in &self.pieces {
            match p {
                Piece::Bytes(b) => out.extend_from_slice(b),
                Piece::Fill { byte, len } => out.resize(out.len() + usize::try_from(*len).unwrap_or(0), *byte),
            }
        }
    }
}
