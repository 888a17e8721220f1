//! Packages and folders as inputs of the inspector: zip archives and Python
//! wheels, Debian packages, tarballs (plain, gzip, xz, zstd, bzip2), conda
//! packages (`.conda`, a zip of zstd tarballs, and the old `.tar.bz2`), and
//! any nesting of these, walked without unpacking to disk.
//!
//! [`walk`] visits, one at a time, every member that may hold code objects
//! (judged by its first bytes: [`may_hold_code`]); the rest are skipped
//! after reading at most [`HEAD_LEN`] bytes. A member stored as is in the
//! input (zip "stored", plain tar, `ar`) is handed over as a slice of the
//! input with its absolute offset; a compressed one is decompressed into
//! memory, or, above [`Limits::in_memory`], into an unlinked temporary file
//! that is then mapped, and has no offset. Folders are walked by [`dir`].
//!
//! One reader per container (private modules): `zip` (central directory, via the
//! `zip` crate), `tar` (via the `tar` crate, mapped or
//! streamed), `deb` (`ar`, via `object`), `stream` (the four
//! compressed-stream formats).

mod buffer;
mod deb;
mod detect;
pub mod dir;
mod rebase;
mod stream;
mod tar;
mod zip;

pub use detect::{HEAD_LEN, Kind, detect, interesting, may_hold_code};
pub use rebase::rebase;

use crate::decode::DecodeBudget;
use crate::{Location, Severity, Step};
use buffer::FillError;
use std::io::Read;

/// How far and how big a walk goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Packages inside packages opened (a wheel in a zip in a tarball is
    /// 3); a compressed stream counts as one level, so that a stream of
    /// streams cannot go on for ever.
    pub max_depth: usize,
    /// Decompressed members up to this size are held in memory; larger
    /// ones are spooled to a temporary file.
    pub in_memory: u64,
    /// Decompressed members above this size are skipped with a warning: a
    /// real shared library is at most a few GiB, while a few MiB of
    /// compressed zeros can claim terabytes; the spool file must fit on
    /// the temporary folder's disk.
    pub max_member: u64,
    /// All members read from compressed data together may come to at most
    /// this many times the input's size (or [`Limits::min_budget`], if
    /// more): real packages expand 2 to 20 times, while a zip or zstd bomb
    /// expands thousands of times and would fill the temporary folder one
    /// spooled member after another.
    pub max_expansion: u64,
    /// The budget a small input gets however small it is.
    pub min_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_depth: 6, in_memory: 64 << 20, max_member: 16 << 30, max_expansion: 1000, min_budget: 4 << 30 }
    }
}

/// A member that may hold code objects.
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    /// The path from the input to the member, outermost first (all
    /// [`Step::PackageMember`]; empty for the contents of a compressed
    /// file that is not a tarball).
    pub steps: &'a [Step],
    /// The member's contents (valid during the visit only).
    pub bytes: &'a [u8],
    /// Absolute offset of `bytes` in the input when they are stored there
    /// as is; `None` when they were decompressed.
    pub offset: Option<u64>,
}

/// What a walk reports, in input order.
#[derive(Debug)]
pub enum Event<'a> {
    /// A member that may hold code objects: scan its bytes.
    Member(Member<'a>),
    /// After each member of the outermost package: how many were passed
    /// (all members, skipped ones included) and, when the container says,
    /// how many there are.
    /// Also sent while a compressed member of the outermost package is
    /// read (a `.deb`'s one `data.tar.xz`) and while one member is
    /// decompressed (a wheel's one large library: its bytes read are
    /// estimated from the share of its stated size produced), with the
    /// same counts and more bytes read.
    Progress {
        /// Members passed so far.
        done: u64,
        /// Members in all, when the container's index says.
        total: Option<u64>,
        /// Bytes of the input read or passed so far (of `data.len()`),
        /// counting the compressed bytes a decoder has taken in.
        read: u64,
    },
    /// A member or nested package that could not be read; the walk goes
    /// on with the next one where the container allows it.
    Problem(PackageError),
}

/// What is wrong, and where: `member torch/lib/libx.so: deflate stream
/// corrupt: ...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{kind}", place(.at))]
pub struct PackageError {
    /// The member (or nested package) concerned; empty for the input.
    pub at: Vec<Step>,
    /// What is wrong.
    pub kind: ErrorKind,
}

fn place(at: &[Step]) -> String {
    if at.is_empty() { String::new() } else { format!("{}: ", Location(at.to_vec())) }
}

impl PackageError {
    /// Warnings are members deliberately left unread; errors are damage.
    pub fn severity(&self) -> Severity {
        match self.kind {
            ErrorKind::TooLarge { .. }
            | ErrorKind::TooDeep(_)
            | ErrorKind::Unsupported(_)
            | ErrorKind::Expansion(_) => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// The kinds of [`PackageError`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A damaged zip archive (the reader's message).
    #[error("damaged zip archive: {0}")]
    Zip(String),
    /// A damaged tar archive (the reader's message).
    #[error("damaged tar archive: {0}")]
    Tar(String),
    /// A damaged `ar` archive (a `.deb`; the reader's error).
    #[error("damaged ar archive: {0}")]
    Ar(#[source] object::read::Error),
    /// A compressed stream (`deflate` for zip members) failed to decode or
    /// its checksum did not match.
    #[error("{format} stream corrupt: {message}")]
    Stream {
        /// The stream's format (`gzip`, `deflate`, `xz`, ...).
        format: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// A member larger than [`Limits::max_member`]: skipped.
    #[error("{size} bytes uncompressed, over the limit of {limit} bytes for one member; not read")]
    TooLarge {
        /// Its uncompressed size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The decompressed members together exceed [`Limits::max_expansion`]
    /// times the input's size (the factor): the rest is skipped.
    #[error("the package expands more than {0} times its size (a compression bomb?); not read")]
    Expansion(u64),
    /// A package nested deeper than [`Limits::max_depth`] (the limit).
    #[error("packages nested more than {0} deep; not opened")]
    TooDeep(usize),
    /// A container or member this reader does not open (why).
    #[error("not read: {0}")]
    Unsupported(String),
    /// A large member could not be written to its temporary file (the
    /// I/O error).
    #[error("cannot spool the member to a temporary file: {0}")]
    Spool(String),
}

/// Walks the package `data` (any [`Kind`]), calling `visit` for each event.
/// `Err` when the package itself cannot be read (nothing, or only the
/// members before the damage, were visited); damage in a nested package or
/// a member is an [`Event::Problem`].
///
/// ```
/// use offload_inspect::{Options, scan};
/// use offload_inspect::package::{Event, Limits, walk};
///
/// // A tarball holding the sample bundle and a file without code.
/// let bundle = include_bytes!("../../../../samples/hip-gfx906-gfx90a.bc");
/// let mut tar = tar::Builder::new(Vec::new());
/// for (path, bytes) in [("lib/kernels.bc", &bundle[..]), ("README", b"text")] {
///     let mut header = tar::Header::new_gnu();
///     header.set_size(bytes.len() as u64);
///     header.set_cksum();
///     tar.append_data(&mut header, path, bytes)?;
/// }
/// let tarball = tar.into_inner()?;
///
/// let mut found = Vec::new();
/// walk(&tarball, &Limits::default(), &mut |event| {
///     if let Event::Member(m) = event {
///         let inventory = scan(m.bytes, "member", &Options::default());
///         found.push((m.steps[0].to_string(), inventory.objects.len(), m.offset.is_some()));
///     }
/// })?;
/// // README was skipped by its first bytes; the bundle is a slice of the
/// // tarball, so it has an offset.
/// assert_eq!(found, [("member lib/kernels.bc".to_string(), 3, true)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn walk(data: &[u8], limits: &Limits, visit: &mut dyn FnMut(Event<'_>)) -> Result<(), PackageError> {
    let head = data.get(..data.len().min(HEAD_LEN)).unwrap_or_default();
    let Some(kind) = detect(head) else {
        return Err(PackageError { at: Vec::new(), kind: ErrorKind::Unsupported("not a package".into()) });
    };
    walk_as(kind, data, limits, visit)
}

/// [`walk`], reading `data` as a `kind` container whatever its first bytes
/// (for fuzzing one reader at a time).
pub fn walk_as(kind: Kind, data: &[u8], limits: &Limits, visit: &mut dyn FnMut(Event<'_>)) -> Result<(), PackageError> {
    let budget = limits.min_budget.max((data.len() as u64).saturating_mul(limits.max_expansion));
    let budget = Budget(DecodeBudget::nested(budget));
    let mut w = Walker {
        limits: *limits,
        visit,
        steps: Vec::new(),
        budget,
        reported: false,
        input: (data.as_ptr() as usize, data.len()),
        read: std::rc::Rc::new(std::cell::Cell::new(0)),
        shown: (0, None, 0),
    };
    w.container(kind, data, Some(0), 0).map_err(|kind| PackageError { at: Vec::new(), kind })
}

/// The decompressed bytes a walk may still produce, shared by every
/// decoder of the walk: bytes read only to be skipped (a tar member in a
/// compressed stream that holds no code), nested streams, zip members and
/// the compressed bundles decoded while a member is visited all count
/// (docs/reliability.md). One [`DecodeBudget`] per walk, nested in the
/// calling thread's current one if any.
#[derive(Clone)]
pub(crate) struct Budget(DecodeBudget);

impl Budget {
    /// Whether a decoder went past the budget.
    pub(crate) fn spent(&self) -> bool {
        self.0.refused()
    }

    /// `reader`, with every byte it produces charged to this budget; past
    /// the budget it fails.
    pub(crate) fn meter<R: Read>(&self, reader: R) -> Metered<R> {
        Metered { inner: reader, budget: self.0.clone() }
    }
}

/// A decoder whose output is charged to a [`Budget`].
pub(crate) struct Metered<R> {
    inner: R,
    budget: DecodeBudget,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.budget.refused() {
            return Err(std::io::Error::other("expansion budget spent"));
        }
        // Never more than one byte past what is left: a bomb stops here.
        let room = usize::try_from(self.budget.left().saturating_add(1)).unwrap_or(usize::MAX).min(buf.len());
        let n = self.inner.read(buf.get_mut(..room).unwrap_or_default())?;
        if !self.budget.charge(n as u64) {
            return Err(std::io::Error::other("expansion budget spent"));
        }
        Ok(n)
    }
}

pub(crate) struct Walker<'v> {
    limits: Limits,
    /// Bytes that decoders may still produce.
    budget: Budget,
    /// The budget's running out was reported (once per walk).
    reported: bool,
    visit: &'v mut dyn FnMut(Event<'_>),
    /// The members entered, outermost first.
    steps: Vec<Step>,
    /// Where the input lies in memory (address, length): bytes of members
    /// that are slices of it say how far the walk has come.
    input: (usize, usize),
    /// The furthest byte of the input read so far: by the walk, or by a
    /// decoder through [`Counted`].
    read: std::rc::Rc<std::cell::Cell<u64>>,
    /// The last progress sent: members done, total, bytes read.
    shown: (u64, Option<u64>, u64),
}

/// A slice of the input read by a decoder, counting how far it has read
/// into the walk's `read` mark (for progress inside compressed members).
pub(crate) struct Counted<'a> {
    data: &'a [u8],
    pos: usize,
    /// Where `data` starts in the input; `None` for decompressed bytes,
    /// whose reading the outer decoder counts already.
    base: Option<u64>,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Counted<'_> {
    fn mark(&self) {
        if let Some(at) = self.base.and_then(|b| b.checked_add(self.pos as u64)) {
            self.read.set(self.read.get().max(at));
        }
    }
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        if let (Some(to), Some(from)) = (buf.get_mut(..n), rest.get(..n)) {
            to.copy_from_slice(from);
        }
        self.pos += n;
        self.mark();
        Ok(n)
    }
}

impl std::io::BufRead for Counted<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(self.data.get(self.pos..).unwrap_or_default())
    }
    fn consume(&mut self, amt: usize) {
        self.pos = self.pos.saturating_add(amt).min(self.data.len());
        self.mark();
    }
}

impl Walker<'_> {
    fn container(&mut self, kind: Kind, data: &[u8], offset: Option<u64>, depth: usize) -> Result<(), ErrorKind> {
        match kind {
            Kind::Zip => zip::walk(self, data, offset, depth),
            Kind::Tar => tar::walk_mapped(self, data, offset, depth),
            Kind::Deb => deb::walk(self, data, offset, depth),
            Kind::Gzip | Kind::Xz | Kind::Zstd | Kind::Bzip2 => stream::walk(self, kind, data, depth),
        }
    }

    fn problem(&mut self, kind: ErrorKind) {
        let at = self.steps.clone();
        (self.visit)(Event::Problem(PackageError { at, kind }));
    }

    /// Where `bytes` start in the input, if they are a slice of it.
    fn offset_of(&self, bytes: &[u8]) -> Option<u64> {
        let (addr, len) = self.input;
        let start = (bytes.as_ptr() as usize).checked_sub(addr)?;
        (start.checked_add(bytes.len())? <= len).then_some(start as u64)
    }

    /// `data` for a decoder, counting what it reads of the input.
    pub(crate) fn counted<'a>(&self, data: &'a [u8]) -> Counted<'a> {
        Counted { data, pos: 0, base: self.offset_of(data), read: self.read.clone() }
    }

    /// After a member: of the outermost package, with its counts; of a
    /// nested one, only when more of the input has been read (a
    /// compressed tarball in a `.deb`).
    fn progress(&mut self, depth: usize, done: u64, total: Option<u64>) {
        let read = self.read.get();
        let (shown_done, shown_total, shown_read) = self.shown;
        let (done, total) = if depth == 0 { (done, total) } else { (shown_done, shown_total) };
        if depth == 0 || read > shown_read {
            self.shown = (done, total, read);
            (self.visit)(Event::Progress { done, total, read });
        }
    }

    /// Enters the member `name` for `f`.
    fn within<T>(&mut self, name: &[u8], f: impl FnOnce(&mut Self) -> T) -> T {
        let text = String::from_utf8_lossy(name);
        let name = text.strip_prefix("./").unwrap_or(&text).to_string();
        self.steps.push(Step::PackageMember(name));
        let out = f(self);
        self.steps.pop();
        out
    }

    /// A member whose bytes are at hand: a package is opened, code is
    /// visited, anything else is skipped.
    fn member(&mut self, bytes: &[u8], offset: Option<u64>, depth: usize) {
        self.member_inner(bytes, offset, depth);
        // Passed: a member that is a slice of the input moves the mark to
        // its end once read (a compressed one moved it while decoding).
        if let Some(end) = self.offset_of(bytes).and_then(|s| s.checked_add(bytes.len() as u64)) {
            self.read.set(self.read.get().max(end));
        }
    }

    fn member_inner(&mut self, bytes: &[u8], offset: Option<u64>, depth: usize) {
        let head = bytes.get(..bytes.len().min(HEAD_LEN)).unwrap_or_default();
        if let Some(kind) = detect(head) {
            if depth + 1 > self.limits.max_depth {
                self.problem(ErrorKind::TooDeep(self.limits.max_depth));
            } else if let Err(e) = self.container(kind, bytes, offset, depth + 1) {
                self.problem(e);
            }
        } else if may_hold_code(head) {
            let steps = self.steps.clone();
            // Compressed bundles decoded for the member are charged to the
            // walk's budget (crate::decode::charge_decoded).
            let visit = &mut self.visit;
            self.budget.0.enter(|| visit(Event::Member(Member { steps: &steps, bytes, offset })));
            if self.budget.spent() && !std::mem::replace(&mut self.reported, true) {
                self.problem(ErrorKind::Expansion(self.limits.max_expansion));
            }
        }
    }

    /// A decoder of `format` failed: the budget was spent (reported once,
    /// naming the member where it ran out), or the stream is corrupt.
    fn read_problem(&mut self, format: &'static str, e: std::io::Error) {
        if !self.budget.spent() {
            self.problem(ErrorKind::Stream { format, message: e.to_string() });
        } else if !std::mem::replace(&mut self.reported, true) {
            self.problem(ErrorKind::Expansion(self.limits.max_expansion));
        }
    }

    /// A member to be read from a stream (`format` names it in errors):
    /// its first bytes decide whether the rest is read at all. `reader`
    /// is a decoder metered by [`Budget::meter`] (or a slice of the input).
    fn member_stream(&mut self, reader: &mut dyn Read, declared: Option<u64>, format: &'static str, depth: usize) {
        if self.budget.spent() {
            return;
        }
        let mut head = Vec::with_capacity(HEAD_LEN);
        if let Err(e) = reader.take(HEAD_LEN as u64).read_to_end(&mut head) {
            return self.read_problem(format, e);
        }
        if !interesting(&head) {
            return;
        }
        let limits = self.limits;
        // A large member takes seconds to decompress: progress is sent
        // while it is read, not only after it (a wheel's one 166 MB
        // library, a `.deb`'s data.tar.xz holding one big file).
        let mut ticking = Ticking { inner: reader, visit: &mut *self.visit, read: &self.read, shown: &mut self.shown };
        let filled = buffer::fill(&head, &mut ticking, declared, &limits);
        match filled {
            Ok(buffer) => self.member(&buffer, None, depth),
            Err(FillError::TooLarge(size)) => self.problem(ErrorKind::TooLarge { size, limit: self.limits.max_member }),
            Err(FillError::Read(e)) => self.read_problem(format, e),
            Err(FillError::Spool(e)) => self.problem(ErrorKind::Spool(e.to_string())),
        }
    }
}

/// How much further the input must have been read before a member being
/// decompressed sends another [`Event::Progress`] (the caller redraws at
/// most every 100 ms; this only bounds the calls).
const PROGRESS_STEP: u64 = 256 << 10;

/// A member's decoder that sends [`Event::Progress`] as the walk's read
/// mark moves while the member is read (the counts of members stay those
/// last shown: the member is not passed yet).
struct Ticking<'a> {
    inner: &'a mut dyn Read,
    visit: &'a mut dyn FnMut(Event<'_>),
    read: &'a std::cell::Cell<u64>,
    shown: &'a mut (u64, Option<u64>, u64),
}

impl Read for Ticking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = self.read.get();
        let (done, total, shown_read) = *self.shown;
        if read >= shown_read.saturating_add(PROGRESS_STEP) {
            *self.shown = (done, total, read);
            (self.visit)(Event::Progress { done, total, read });
        }
        Ok(n)
    }
}

/// Where `inner` starts in `outer`, if it is a part of it.
fn start_in(outer: &[u8], inner: &[u8]) -> Option<u64> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    (start.checked_add(inner.len())? <= outer.len()).then_some(start as u64)
}

#[cfg(test)]
mod tests;
