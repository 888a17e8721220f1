//! The kernels (`.entry` directives) of PTX text and the launch limits they
//! declare: `.maxntid`, `.reqntid`, `.minnctapersm` and `.maxnreg`
//! (PTX ISA, "Performance-Tuning Directives"; `docs/formats/kernels.md`
//! §4). Also the `.target` and `.version` of the module.
//!
//! Hostile input: a linear scan over the text, comments skipped; numbers
//! that do not fit `u32` are ignored; each entry's directive list is
//! bounded by the text. No allocation beyond the entries found.

/// One `.entry` of a PTX module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxEntry {
    /// The entry's name (mangled, as written).
    pub name: String,
    /// `.maxntid x[, y[, z]]`: most threads per block (missing dimensions 1).
    pub maxntid: Option<[u32; 3]>,
    /// `.reqntid x[, y[, z]]`: the exact block size.
    pub reqntid: Option<[u32; 3]>,
    /// `.minnctapersm n`: blocks per SM asked for.
    pub minnctapersm: Option<u32>,
    /// `.maxnreg n`: registers per thread at most.
    pub maxnreg: Option<u32>,
    /// `.extern .entry` declaration without a body.
    pub declaration: bool,
}

/// What the text of a PTX module declares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxModule {
    /// `.version`, e.g. `8.5`.
    pub version: Option<String>,
    /// `.target` first item, e.g. `sm_80`.
    pub target: Option<String>,
    /// Every `.entry`, in text order.
    pub entries: Vec<PtxEntry>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    Punct(u8),
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'%')
}

/// Tokens of `text`: words (identifiers, directives, numbers) and single
/// punctuation bytes; comments and string literals skipped.
fn tokens(text: &[u8]) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        if b.is_ascii_whitespace() {
            i += 1;
        } else if text.get(i..i + 2) == Some(b"//") {
            i = memchr::memchr(b'\n', &text[i..]).map_or(text.len(), |n| i + n);
        } else if text.get(i..i + 2) == Some(b"/*") {
            i = memchr::memmem::find(&text[i + 2..], b"*/").map_or(text.len(), |n| i + 2 + n + 2);
        } else if b == b'"' {
            i = memchr::memchr(b'"', &text[i + 1..]).map_or(text.len(), |n| i + 1 + n + 1);
        } else if is_word_byte(b) {
            let start = i;
            while text.get(i).is_some_and(|&c| is_word_byte(c)) {
                i += 1;
            }
            // Words are ASCII by construction.
            if let Ok(w) = std::str::from_utf8(&text[start..i]) {
                out.push(Tok::Word(w));
            }
        } else {
            out.push(Tok::Punct(b));
            i += 1;
        }
    }
    out
}

fn number(tok: Option<&Tok<'_>>) -> Option<u32> {
    match tok? {
        Tok::Word(w) => {
            if let Some(hex) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
                u32::from_str_radix(hex, 16).ok()
            } else {
                w.parse().ok()
            }
        }
        Tok::Punct(_) => None,
    }
}

/// Up to three comma-separated numbers from `toks[*at]`; missing ones are 1.
fn dims(toks: &[Tok<'_>], at: &mut usize) -> Option<[u32; 3]> {
    let mut out = [1u32; 3];
    for (k, slot) in out.iter_mut().enumerate() {
        if k > 0 {
            if toks.get(*at) != Some(&Tok::Punct(b',')) {
                break;
            }
            *at += 1;
        }
        *slot = number(toks.get(*at))?;
        *at += 1;
    }
    Some(out)
}

/// Reads the entries of PTX `text` (any bytes: invalid UTF-8 outside
/// identifiers is skipped).
pub fn read(text: &[u8]) -> PtxModule {
    let toks = tokens(text);
    let mut module = PtxModule::default();
    let mut i = 0;
    while let Some(tok) = toks.get(i) {
        i += 1;
        let Tok::Word(word) = *tok else { continue };
        match word {
            ".version" if module.version.is_none() => {
                if let Some(Tok::Word(v)) = toks.get(i) {
                    module.version = Some((*v).to_string());
                }
            }
            ".target" if module.target.is_none() => {
                if let Some(Tok::Word(t)) = toks.get(i) {
                    module.target = Some((*t).to_string());
                }
            }
            ".entry" => {
                let Some(Tok::Word(name)) = toks.get(i) else { continue };
                let declaration = i >= 2 && toks.get(i - 2) == Some(&Tok::Word(".extern"));
                let mut entry = PtxEntry { name: (*name).to_string(), declaration, ..PtxEntry::default() };
                i += 1;
                // The parameter list, if any.
                if toks.get(i) == Some(&Tok::Punct(b'(')) {
                    while let Some(t) = toks.get(i) {
                        i += 1;
                        if *t == Tok::Punct(b')') {
                            break;
                        }
                    }
                }
                // Directives up to the body or the end of the declaration.
                while let Some(t) = toks.get(i) {
                    match *t {
                        Tok::Punct(b'{') | Tok::Punct(b';') => break,
                        Tok::Word(".maxntid") => {
                            i += 1;
                            entry.maxntid = dims(&toks, &mut i);
                        }
                        Tok::Word(".reqntid") => {
                            i += 1;
                            entry.reqntid = dims(&toks, &mut i);
                        }
                        Tok::Word(".minnctapersm") => {
                            i += 1;
                            entry.minnctapersm = number(toks.get(i));
                        }
                        Tok::Word(".maxnreg") => {
                            i += 1;
                            entry.maxnreg = number(toks.get(i));
                        }
                        Tok::Word(".entry") | Tok::Word(".func") => break,
                        _ => i += 1,
                    }
                }
                module.entries.push(entry);
            }
            _ => {}
        }
    }
    module
}

/// Whether `data` looks like PTX text: after comments and blank space, a
/// `.version` directive comes first (what `ptxas` requires).
pub fn is_ptx(data: &[u8]) -> bool {
    let head = data.get(..data.len().min(4096)).unwrap_or(data);
    matches!(tokens(head).first(), Some(Tok::Word(".version")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
//
// Generated by NVIDIA NVVM Compiler
//
.version 8.5
.target sm_80
.address_size 64

	// .globl	_Z5scalePffi
.visible .entry _Z5scalePffi(
	.param .u64 _Z5scalePffi_param_0,
	.param .f32 _Z5scalePffi_param_1,
	.param .u32 _Z5scalePffi_param_2
)
.maxntid 256, 1, 1
.minnctapersm 2
{
	ret;
}
/* .entry commented(out) .maxntid 1 */
.entry bare
.reqntid 32, 4
.maxnreg 0x40
{
	ret;
}
.extern .entry ext(.param .u32 a);
.visible .func helper() { ret; }
.entry noparams() { ret; }
"#;

    #[test]
    fn entries_and_limits() {
        let m = read(PTX.as_bytes());
        assert_eq!(m.version.as_deref(), Some("8.5"));
        assert_eq!(m.target.as_deref(), Some("sm_80"));
        let names: Vec<_> = m.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["_Z5scalePffi", "bare", "ext", "noparams"]);
        assert_eq!(m.entries[0].maxntid, Some([256, 1, 1]));
        assert_eq!(m.entries[0].minnctapersm, Some(2));
        assert_eq!(m.entries[0].reqntid, None);
        assert_eq!(m.entries[1].reqntid, Some([32, 4, 1]));
        assert_eq!(m.entries[1].maxnreg, Some(64));
        assert!(m.entries[2].declaration);
        assert!(!m.entries[3].declaration);
        assert_eq!(m.entries[3], PtxEntry { name: "noparams".into(), ..PtxEntry::default() });
        assert!(is_ptx(PTX.as_bytes()));
        assert!(!is_ptx(b"\x7fELF"));
    }

    #[test]
    fn hostile_text() {
        // Truncated everywhere, unterminated comments and parameter lists,
        // numbers that overflow: no panic, what can be read is read.
        for cut in 0..PTX.len() {
            let _ = read(&PTX.as_bytes()[..cut]);
        }
        let m = read(b".entry k .maxntid 99999999999, -1 .maxnreg {");
        assert_eq!(m.entries.len(), 1);
        assert_eq!(m.entries[0].maxntid, None);
        assert_eq!(m.entries[0].maxnreg, None);
        assert_eq!(read(b".entry").entries, []);
        assert_eq!(read(b"/* .entry x").entries, []);
        assert_eq!(read(b".entry x ( \xff\xfe").entries.len(), 1);
    }
}
