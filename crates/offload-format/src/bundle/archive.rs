//! Heterogeneous device archives (`-type=a`, unbundling only): an `ar`
//! archive whose members are bundles (fat objects or binary bundles) is
//! split into one archive per requested target, holding every compatible
//! code object of every member, as LLVM 19 does:
//!
//! * members in archive order, and within a member the bundles in the
//!   handler's order (section order for objects, LLVM's StringMap order for
//!   binary bundles); a member without bundles is skipped;
//! * a bundle goes to *every* compatible target (no first-match rule);
//! * it is named `<stem>-<stored id><stem><ext>` with `:` replaced by `_`,
//!   `<ext>` being `.bc` for target IDs containing `gfx`, `.cubin` for
//!   `sm_`, and the member's own extension otherwise;
//! * the outputs are GNU archives written deterministically, with a symbol
//!   index of the members' defined global symbols (objects through
//!   `object`, bitcode through its IR symbol table, see
//!   [`crate::bitcode`]);
//! * a target without code objects is an error, or with
//!   `-allow-missing-bundles` an empty archive (`!<arch>\n`).
//! * the members of a thin archive are read from the files they name,
//!   through a reader the caller passes (this library does no file I/O).

use super::binary;
use super::object::{self as object_bundle, ObjectError};
use crate::bitcode;
use crate::elf;
use crate::offload_binary::archive::{header_safe_name, patch_short_names};
use crate::string_map::{StringHash, string_map_order};
use crate::target_id::{BundleEntryId, find_conflict, is_compatible};
use ar_archive_writer::{ArchiveKind, NewArchiveMember, ObjectReader};
use object::read::archive::ArchiveFile;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Cursor;

/// Why an archive cannot be unbundled; the wording of LLVM 19 where it has
/// a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The archive itself does not parse.
    #[error("'{archive}': {message}")]
    Malformed {
        /// The archive's name as given.
        archive: String,
        /// What is wrong.
        message: String,
    },
    /// The input does not start with an archive's magic. The message is
    /// LLVM's (19 and 22) for any such input, whatever its size: its archive
    /// reader says so when the magic is missing (docs/llvm-tests.md).
    #[error("file too small to be an archive")]
    NotAnArchive,
    /// A thin archive, whose members are other files.
    #[error("'{archive}': thin archives are not supported (their members live in other files)")]
    Thin {
        /// The archive's name as given.
        archive: String,
    },
    /// A member file of a thin archive could not be read (LLVM's wording).
    #[error("'{member}': {message}")]
    ThinMember {
        /// The member's path.
        member: String,
        /// What is wrong.
        message: String,
    },
    /// A member that cannot be unbundled.
    #[error("'{member}' in '{archive}': {source}")]
    Member {
        /// The archive's name as given.
        archive: String,
        /// The member's name.
        member: String,
        /// What is wrong with it.
        source: MemberError,
    },
    /// Two entries of one member are compatible with the same target but
    /// name different target IDs.
    #[error("conflicting TargetIDs [{first}, {second}] found in {member} of {archive}")]
    Conflict {
        /// The first target ID.
        first: String,
        /// The second target ID.
        second: String,
        /// The member's name.
        member: String,
        /// The archive's name.
        archive: String,
    },
    /// No member has code for a target asked for (and missing bundles are
    /// not allowed).
    #[error("no compatible code object found for the target '{target}' in heterogeneous archive library: {archive}")]
    NoCompatible {
        /// The target asked for.
        target: String,
        /// The archive's name.
        archive: String,
    },
    /// The output archive for a target could not be built.
    #[error("cannot write the archive for '{target}': {message}")]
    Write {
        /// The target the archive is for.
        target: String,
        /// What went wrong.
        message: String,
    },
}

/// What is wrong with one member.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemberError {
    /// An object file that cannot be used.
    #[error("{0}")]
    Object(#[from] ObjectError),
    /// A malformed bundle.
    #[error("{0}")]
    Bundle(#[from] super::BundleError),
    /// A compressed bundle that does not decompress (the reason).
    #[error("Failed to decompress code object: {0}")]
    Decompress(#[source] super::compressed::CompressedError),
    /// The host object to write (its size in bytes) cannot be allocated.
    #[error("the host object ({0} bytes) does not fit in memory")]
    HostTooLarge(u64),
    /// Bundles that share bytes (overlapping sections or entries, several
    /// host markers): a way to make a small member produce huge outputs.
    #[error("malformed member: its bundles claim {total} bytes, more than the {len} bytes it holds")]
    Overlapping {
        /// The bytes the bundles claim together.
        total: u64,
        /// The member's length in bytes.
        len: u64,
    },
}

/// Options of an archive unbundling run.
#[derive(Debug, Clone, Copy)]
pub struct ArchiveOptions {
    /// The release whose rules read and match the bundle entry IDs.
    pub release: crate::llvm_release::LlvmRelease,
    /// `-allow-missing-bundles`: a target with no code in any member is
    /// not an error.
    pub allow_missing_bundles: bool,
    /// `-hip-openmp-compatible`: HIP entries also serve OpenMP targets.
    pub hip_openmp_compatible: bool,
    /// `-check-input-archive`: report members whose entries conflict.
    pub check_input_archive: bool,
}

impl Default for ArchiveOptions {
    /// Nothing allowed, LLVM 19's rules (the library's behaviour before the
    /// release became a choice).
    fn default() -> Self {
        ArchiveOptions {
            release: crate::llvm_release::LlvmRelease::Llvm19,
            allow_missing_bundles: false,
            hip_openmp_compatible: false,
            check_input_archive: false,
        }
    }
}

/// The bytes of an archive member as the bundle readers see them: a
/// compressed bundle (CCOB) is decompressed and its hash checked, as for a
/// whole input.
pub fn member_bytes(raw: &[u8]) -> Result<Cow<'_, [u8]>, MemberError> {
    if !super::compressed::is_compressed(raw) {
        return Ok(Cow::Borrowed(raw));
    }
    super::compressed::read_single_blob(raw)
        .and_then(|blob| super::compressed::decompress(&blob))
        .map(Cow::Owned)
        .map_err(MemberError::Decompress)
}

/// One bundle of a member: its stored ID and its payload (`None`: the
/// host object, which is computed once per member).
struct Found<'a> {
    id: &'a [u8],
    payload: Option<&'a [u8]>,
}

/// The bundles of one member in LLVM's handler order, and the host object
/// when a fat object has a host marker. Bundles may not claim more bytes
/// than the member holds (plus one host object): sections or entries that
/// overlap would otherwise multiply a small member into huge outputs.
fn member_bundles(data: &[u8]) -> Result<(Vec<Found<'_>>, Option<Vec<u8>>), MemberError> {
    let mut host = None;
    let found: Vec<Found<'_>> = if let Some(format) = object_bundle::detect(data)? {
        let sections = object_bundle::bundles(data, format)?;
        let mut out = Vec::with_capacity(sections.len());
        for s in sections {
            let payload = if s.is_host_marker() {
                if host.is_none() {
                    // Its size may come from header fields (COFF
                    // uninitialized data is written out as zeros).
                    let plan = object_bundle::host_object(data, format)?;
                    host = Some(plan.try_to_vec().ok_or(MemberError::HostTooLarge(plan.len()))?);
                }
                None
            } else {
                Some(s.contents)
            };
            out.push(Found { id: s.id, payload });
        }
        out
    } else {
        let Some(entries) = binary::read(data)? else { return Ok((Vec::new(), None)) };
        let ids: Vec<&[u8]> = entries.iter().map(|e| e.id).collect();
        // The last entry of each ID (LLVM's map keeps the last), in one pass.
        let mut last = std::collections::HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            last.insert(*id, i);
        }
        string_map_order(&ids, StringHash::Xxh3)
            .into_iter()
            .filter_map(|first| last.get(ids[first]).map(|&i| &entries[i]))
            .map(|e| Found { id: e.id, payload: Some(e.payload) })
            .collect()
    };
    let host_len = host.as_ref().map_or(0, Vec::len) as u64;
    let total = found.iter().fold(0u64, |sum, f| sum.saturating_add(f.payload.map_or(host_len, |p| p.len() as u64)));
    if total > data.len() as u64 + host_len {
        return Err(MemberError::Overlapping { total, len: data.len() as u64 });
    }
    Ok((found, host))
}

/// The bundle IDs of a member as `-check-input-archive` collects them: the
/// member as stored (not decompressed), sorted and without duplicates.
fn member_ids(data: &[u8]) -> Result<BTreeSet<String>, MemberError> {
    let ids: Vec<&[u8]> = if let Some(format) = object_bundle::detect(data)? {
        object_bundle::bundles(data, format)?.into_iter().map(|s| s.id).collect()
    } else {
        binary::read(data)?.unwrap_or_default().into_iter().map(|e| e.id).collect()
    };
    Ok(ids.into_iter().map(|id| String::from_utf8_lossy(id).into_owned()).collect())
}

/// `llvm::sys::path::filename`, `stem` and `extension` for POSIX paths.
fn filename(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) if i + 1 == path.len() && path.len() > 1 => b".",
        Some(i) => &path[i + 1..],
        None => path,
    }
}

fn split_extension(name: &[u8]) -> (&[u8], &[u8]) {
    if name == b"." || name == b".." {
        return (name, b"");
    }
    match name.iter().rposition(|&b| b == b'.') {
        Some(i) => (&name[..i], &name[i..]),
        None => (name, b""),
    }
}

/// LLVM's name for a code object taken from member `member` (a file name).
pub fn device_member_name(member: &[u8], stored_id: &[u8]) -> Vec<u8> {
    let (stem, ext) = split_extension(member);
    let target_id = BundleEntryId::parse(&String::from_utf8_lossy(stored_id)).target_id;
    let ext: &[u8] = if target_id.contains("gfx") {
        b".bc"
    } else if target_id.contains("sm_") {
        b".cubin"
    } else {
        ext
    };
    let mut name = [stem, b"-", stored_id, stem, ext].concat();
    for b in &mut name {
        if *b == b':' {
            *b = b'_';
        }
    }
    name
}

/// Reads the member files of a thin archive, given a member's name as
/// stored (a path relative to the archive's folder, or absolute). The
/// library does no file I/O: a caller that can read files passes one, and
/// without it thin archives are refused.
pub type ThinMemberReader<'r> = &'r dyn Fn(&[u8]) -> Result<Vec<u8>, String>;

/// A member's bytes: inside the archive, or (thin archives) read from the
/// file its name gives.
fn member_data<'a>(
    member: &object::read::archive::ArchiveMember<'a>,
    input: &'a [u8],
    archive: &str,
    thin: Option<ThinMemberReader>,
) -> Result<Cow<'a, [u8]>, ArchiveError> {
    if !member.is_thin() {
        return member
            .data(input)
            .map(Cow::Borrowed)
            .map_err(|e| ArchiveError::Malformed { archive: archive.to_string(), message: e.to_string() });
    }
    let read = thin.ok_or_else(|| ArchiveError::Thin { archive: archive.to_string() })?;
    read(member.name()).map(Cow::Owned).map_err(|message| ArchiveError::ThinMember {
        member: String::from_utf8_lossy(member.name()).into_owned(),
        message,
    })
}

fn read_archive<'a>(input: &'a [u8], archive: &str) -> Result<ArchiveFile<'a>, ArchiveError> {
    if !input.starts_with(b"!<arch>\n") && !input.starts_with(b"!<thin>\n") && !input.starts_with(b"<bigaf>\n") {
        return Err(ArchiveError::NotAnArchive);
    }
    let file = ArchiveFile::parse(input)
        .map_err(|e| ArchiveError::Malformed { archive: archive.to_string(), message: e.to_string() })?;
    Ok(file)
}

/// Unbundles `input` (named `archive` in messages) into one archive per
/// target of `targets` (standardized IDs, in `-targets` order). The
/// members of a thin archive are read with `thin`.
pub fn unbundle(
    targets: &[String],
    input: &[u8],
    archive: &str,
    options: ArchiveOptions,
    thin: Option<ThinMemberReader>,
) -> Result<Vec<Vec<u8>>, ArchiveError> {
    let file = read_archive(input, archive)?;
    if file.is_thin() && thin.is_none() {
        return Err(ArchiveError::Thin { archive: archive.to_string() });
    }
    let malformed = |e: object::Error| ArchiveError::Malformed { archive: archive.to_string(), message: e.to_string() };
    let member_error = |name: &[u8], source: MemberError| ArchiveError::Member {
        archive: archive.to_string(),
        member: String::from_utf8_lossy(name).into_owned(),
        source,
    };

    // Members read by the check, kept for the pass below (a thin
    // archive's members are files, read once).
    let mut checked: Vec<Cow<'_, [u8]>> = Vec::new();
    if options.check_input_archive {
        for member in file.members() {
            let member = member.map_err(malformed)?;
            let data = member_data(&member, input, archive, thin)?;
            let ids = member_ids(&data).map_err(|e| member_error(member.name(), e))?;
            let ids: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
            if let Some((first, second)) = find_conflict(&ids) {
                return Err(ArchiveError::Conflict {
                    first: first.to_string(),
                    second: second.to_string(),
                    member: String::from_utf8_lossy(member.name()).into_owned(),
                    archive: archive.to_string(),
                });
            }
            checked.push(data);
        }
    }
    let mut checked = checked.into_iter();

    let requested: Vec<BundleEntryId> = targets.iter().map(|t| BundleEntryId::parse_as(options.release, t)).collect();
    let mut outputs: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); targets.len()];
    for member in file.members() {
        let member = member.map_err(malformed)?;
        let raw = match checked.next() {
            Some(raw) => raw,
            None => member_data(&member, input, archive, thin)?,
        };
        let data = member_bytes(&raw).map_err(|e| member_error(member.name(), e))?;
        let (bundles, host) = member_bundles(&data).map_err(|e| member_error(member.name(), e))?;
        let file_name = filename(member.name());
        for found in bundles {
            let payload = found.payload.or(host.as_deref()).unwrap_or_default();
            // LLVM stops at an empty ID.
            if found.id.is_empty() {
                break;
            }
            let stored = BundleEntryId::parse_as(options.release, &String::from_utf8_lossy(found.id));
            let name = String::from_utf8_lossy(&device_member_name(file_name, found.id)).into_owned();
            for (k, target) in requested.iter().enumerate() {
                if is_compatible(&stored, target, &targets[k], options.hip_openmp_compatible) {
                    outputs[k].push((name.clone(), payload.to_vec()));
                }
            }
        }
    }

    let mut archives = Vec::with_capacity(targets.len());
    for (k, members) in outputs.into_iter().enumerate() {
        if members.is_empty() && !options.allow_missing_bundles {
            return Err(ArchiveError::NoCompatible { target: targets[k].clone(), archive: archive.to_string() });
        }
        archives.push(
            write_gnu_archive(members)
                .map_err(|message| ArchiveError::Write { target: targets[k].clone(), message })?,
        );
    }
    Ok(archives)
}

/// Symbols of a member for the archive index, as LLVM's archive writer
/// finds them: bitcode through its IR symbol table, objects through their
/// symbol tables (defined, global, not file or section symbols). Never
/// panics; a symbol name that cannot be read is an error.
fn member_symbols(buf: &[u8], f: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<bool> {
    use object::{Object as _, ObjectSymbol as _};
    if bitcode::is_bitcode(buf) {
        let Some(names) = bitcode::archive_symbols(buf) else { return Ok(true) };
        for name in names {
            f(name)?;
        }
        return Ok(true);
    }
    if elf::is_elf(buf) {
        let Ok(file) = elf::symbol_index::open(buf) else { return Ok(false) };
        let names = elf::symbol_index::names(&file)
            .map_err(|e| std::io::Error::other(format!("unreadable symbol name: {e}")))?;
        for name in names {
            f(name)?;
        }
        return Ok(true);
    }
    // COFF and Mach-O: read through `object` (ARCHITECTURE.md, "One reader
    // per format").
    let Ok(file) = object::File::parse(buf) else { return Ok(false) };
    for sym in file.symbols() {
        if matches!(sym.kind(), object::SymbolKind::File | object::SymbolKind::Section)
            || !sym.is_global()
            || sym.is_undefined()
        {
            continue;
        }
        let name = sym.name_bytes().map_err(|e| std::io::Error::other(format!("unreadable symbol name: {e}")))?;
        f(name)?;
    }
    Ok(true)
}

fn is_64_bit(buf: &[u8]) -> bool {
    (elf::has_ident(buf) && buf.get(4) == Some(&2))
        || matches!(object::FileKind::parse(buf), Ok(object::FileKind::MachO64))
}

static READER: ObjectReader = ObjectReader {
    get_symbols: member_symbols,
    is_64_bit_object_file: is_64_bit,
    is_ec_object_file: |_| false,
    is_any_arm64_coff: |_| false,
    get_xcoff_member_alignment: |_| 2,
};

/// Whether LLVM's archive writer reads symbols from this member (bitcode
/// and object files); only such members make it write a symbol table.
fn is_symbolic(buf: &[u8]) -> bool {
    if elf::is_elf(buf) {
        return elf::symbol_index::open(buf).is_ok();
    }
    bitcode::is_bitcode(buf) || object::File::parse(buf).is_ok()
}

/// Removes the leading symbol table member (`/`) of a GNU archive. Members
/// do not refer to absolute offsets, so nothing else changes.
fn without_symbol_table(archive: Vec<u8>) -> Vec<u8> {
    let Some(header) = archive.get(8..68) else { return archive };
    if !header.starts_with(b"/ ") {
        return archive;
    }
    let size = std::str::from_utf8(&header[48..58]).ok().and_then(|s| s.trim().parse::<usize>().ok());
    match size.and_then(|n| archive.get(68 + n + n % 2..)) {
        Some(rest) => [b"!<arch>\n".as_slice(), rest].concat(),
        None => archive,
    }
}

/// Writes a GNU archive as LLVM's `writeArchive` does with a normal symbol
/// table in deterministic mode. Unlike LLVM 19, `ar_archive_writer` writes
/// an (empty) symbol table even when no member is an object or bitcode
/// file; that table is taken out again.
pub fn write_gnu_archive(members: Vec<(String, Vec<u8>)>) -> Result<Vec<u8>, String> {
    let has_object = members.iter().any(|(_, data)| is_symbolic(data));
    // Short names with non-ASCII bytes (from hostile member names or IDs)
    // go through same-length ASCII placeholders; see `header_safe_name`.
    let names: Vec<String> = members.iter().map(|(name, _)| name.clone()).collect();
    let members: Vec<NewArchiveMember<'_>> =
        members.into_iter().map(|(name, data)| NewArchiveMember::new(data, &READER, header_safe_name(&name))).collect();
    let mut out = Cursor::new(Vec::new());
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ar_archive_writer::write_archive_to_stream(&mut out, &members, ArchiveKind::Gnu, false, None)
    }));
    let finish = |mut bytes: Vec<u8>| {
        patch_short_names(&mut bytes, names.iter().map(String::as_str));
        bytes
    };
    match written {
        Ok(Ok(())) if has_object => Ok(finish(out.into_inner())),
        Ok(Ok(())) => Ok(finish(without_symbol_table(out.into_inner()))),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the archive writer failed on these members".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing the packager's archive writer (rt_archive): short
    /// non-ASCII names gave 61-byte member headers. Device member names
    /// carry stored IDs and member names from the input, so this writer
    /// had the same fault.
    #[test]
    fn non_ascii_member_names_read_back() {
        let names = ["\u{e9}-x\u{e9}.bc", "ascii.o", "\u{1F600}-h\u{1F600}"];
        let members: Vec<(String, Vec<u8>)> =
            names.iter().enumerate().map(|(i, n)| (n.to_string(), vec![b'a' + i as u8; i + 1])).collect();
        let ar = write_gnu_archive(members.clone()).unwrap();
        let file = ArchiveFile::parse(&ar[..]).unwrap();
        let got: Vec<(String, Vec<u8>)> = file
            .members()
            .map(|m| {
                let m = m.unwrap();
                (String::from_utf8(m.name().to_vec()).unwrap(), m.data(&ar[..]).unwrap().to_vec())
            })
            .collect();
        assert_eq!(got, members);
    }

    /// Two entries of a member's bundle share one payload: unbundling would
    /// copy it once per entry (a few hundred bytes can claim gigabytes this
    /// way). Such a member is refused.
    #[test]
    fn overlapping_bundles_are_refused() {
        let payload = vec![7u8; 1000];
        let entries: [(&[u8], &[u8]); 2] =
            [(b"hip-amdgcn-amd-amdhsa--gfx906", &payload), (b"hip-amdgcn-amd-amdhsa--gfx908", b"")];
        let mut bundle = binary::write(&entries, std::num::NonZeroU64::new(1).unwrap()).to_vec();
        // Second record (after the first record's 24 + 29 bytes): point it
        // at the first payload.
        let first_offset: [u8; 8] = bundle[32..40].try_into().unwrap();
        let second = 32 + 24 + 29;
        bundle[second..second + 8].copy_from_slice(&first_offset);
        bundle[second + 8..second + 16].copy_from_slice(&1000u64.to_le_bytes());
        let ar = write_gnu_archive(vec![("m.bc".to_string(), bundle)]).unwrap();
        let targets = ["hip-amdgcn-amd-amdhsa--gfx906".to_string(), "hip-amdgcn-amd-amdhsa--gfx908".to_string()];
        let e = unbundle(&targets, &ar, "x.a", ArchiveOptions::default(), None).unwrap_err();
        assert!(matches!(e, ArchiveError::Member { source: MemberError::Overlapping { total: 2000, .. }, .. }), "{e}");
        assert!(e.to_string().contains("claim 2000 bytes"), "{e}");
    }

    #[test]
    fn member_names_follow_llvm() {
        let n = |m: &str, id: &str| String::from_utf8(device_member_name(m.as_bytes(), id.as_bytes())).unwrap();
        assert_eq!(n("a1.o", "hip-amdgcn-amd-amdhsa--gfx906"), "a1-hip-amdgcn-amd-amdhsa--gfx906a1.bc");
        assert_eq!(
            n("a2.o", "hipv4-amdgcn-amd-amdhsa--gfx908:sramecc-:xnack+"),
            "a2-hipv4-amdgcn-amd-amdhsa--gfx908_sramecc-_xnack+a2.bc"
        );
        assert_eq!(n("a1.o", "openmp-nvptx64-nvidia-cuda--sm_70"), "a1-openmp-nvptx64-nvidia-cuda--sm_70a1.cubin");
        assert_eq!(n("a1.o", "host-x86_64-unknown-linux-gnu-"), "a1-host-x86_64-unknown-linux-gnu-a1.o");
        assert_eq!(n("noext", "openmp-x86_64-pc-linux-gnu-"), "noext-openmp-x86_64-pc-linux-gnu-noext");
        assert_eq!(n("x.tar.o", "hip-amdgcn-amd-amdhsa--gfx906"), "x.tar-hip-amdgcn-amd-amdhsa--gfx906x.tar.bc");
        assert_eq!(n(".hidden", "openmp-x86_64-pc-linux-gnu-"), "-openmp-x86_64-pc-linux-gnu-.hidden");
    }

    #[test]
    fn filenames_are_the_last_path_component() {
        assert_eq!(filename(b"dir/a.o"), b"a.o");
        assert_eq!(filename(b"a.o"), b"a.o");
        assert_eq!(filename(b"dir/"), b".");
        assert_eq!(split_extension(b".."), (&b".."[..], &b""[..]));
    }

    #[test]
    fn empty_archive_is_the_magic_only() {
        assert_eq!(write_gnu_archive(Vec::new()).unwrap(), b"!<arch>\n");
    }

    #[test]
    fn archives_of_blobs_have_no_symbol_table() {
        let a = write_gnu_archive(vec![("a_rather_long_member_name.bin".into(), b"blob".to_vec())]).unwrap();
        assert!(a.starts_with(b"!<arch>\n//"), "{:?}", String::from_utf8_lossy(&a));
        let parsed = object::read::archive::ArchiveFile::parse(&*a).unwrap();
        let m = parsed.members().next().unwrap().unwrap();
        assert_eq!(m.name(), b"a_rather_long_member_name.bin");
        assert_eq!(m.data(&*a).unwrap(), b"blob");
    }

    #[test]
    fn not_an_archive_is_an_error() {
        let e = unbundle(&["hip-amdgcn-amd-amdhsa--gfx906".into()], b"nope", "x.a", ArchiveOptions::default(), None);
        assert_eq!(e, Err(ArchiveError::NotAnArchive));
        assert_eq!(ArchiveError::NotAnArchive.to_string(), "file too small to be an archive");
    }
}
