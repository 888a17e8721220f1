//! Adding and removing sections of an ELF file with llvm-objcopy 19's
//! observable behaviour, so that the output is byte-identical to
//! `llvm-objcopy --add-section=N=F --set-section-flags=N=readonly,exclude`
//! (bundling) and `llvm-objcopy --regex --remove-section=P` (host
//! extraction). What objcopy does, and therefore what we do:
//!
//! * Section contents are copied verbatim, except the tables objcopy keeps
//!   as a model and writes again: non-allocated string tables (rebuilt with
//!   only the section and symbol names still in use, tail-merged), the
//!   symbol table, non-allocated relocation sections, section groups and
//!   `SHT_SYMTAB_SHNDX`. Symbol tables and relocation sections get the
//!   natural alignment and entry size of their class.
//! * Removing a section renumbers the sections after it, in symbols,
//!   `sh_link`, relocation `sh_info`, group members and section index
//!   tables; relocation sections of removed sections, groups left without
//!   members and symbols defined in removed sections go too.
//! * Layout: the ELF header, then the kept sections in the order of their
//!   original offsets (new sections last), each at its alignment, gaps
//!   zero-filled, then the section header table aligned to the word size.
//!   With 0xff00 sections or more, extended numbering is used.
//!
//! Files with program headers are refused: objcopy would have to keep their
//! segments in place, and fat objects are relocatable files.

use super::strtab::StringTable;
use super::*;
use crate::plan::Plan;
use std::borrow::Cow;

/// A section to append: type SHT_PROGBITS, flags SHF_EXCLUDE, alignment 1
/// (what `--set-section-flags=readonly,exclude` gives a new section).
#[derive(Clone, Debug)]
pub struct NewSection<'a> {
    pub name: Vec<u8>,
    pub data: &'a [u8],
}

/// What objcopy turns a section into when it reads the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Contents copied; `sh_link` follows its section.
    Plain,
    /// Like `Plain`, but `sh_link` and `sh_info` are left as they are.
    Opaque,
    /// Allocated SHT_REL/SHT_RELA: contents copied, `sh_link` and
    /// `sh_info` follow their sections.
    DynReloc,
    /// Non-allocated SHT_REL/SHT_RELA: rewritten from its entries.
    Reloc {
        rela: bool,
    },
    StrTab,
    SymTab,
    Shndx,
    Group,
    Added,
}

struct Sec<'a> {
    name: Cow<'a, [u8]>,
    sh: SectionHeader,
    data: &'a [u8],
    role: Role,
    /// Section referred to by `sh_link` (for Plain, Reloc, Group: by id).
    link: Option<usize>,
    /// `sh_link` names the symbol table (restored only if no symbol moved).
    link_is_symtab: bool,
    /// Section referred to by `sh_info` (relocation target).
    info: Option<usize>,
    /// Group: flag word and member ids.
    group: Option<(u32, Vec<usize>)>,
    /// Some symbol is defined in this section.
    has_symbol: bool,
    alive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shndx {
    Undef,
    Reserved(u16),
    Section(usize),
}

struct Sym<'a> {
    name: &'a [u8],
    info: u8,
    other: u8,
    shndx: Shndx,
    value: u64,
    size: u64,
}

const GRP_COMDAT: u32 = 1;
const STB_LOCAL: u8 = 0;

fn refused(msg: String) -> ElfError {
    ElfError::Refused(msg)
}

fn reserved_index_ok(index: u16, machine: u16) -> bool {
    match index {
        SHN_ABS | SHN_COMMON => true,
        0xff00 if machine == EM_AMDGPU => true,
        0xff00..=0xff02 if machine == EM_MIPS => true,
        0xff00..=0xff04 if machine == EM_HEXAGON => true,
        _ => false,
    }
}

/// The symbol index stored in a relocation's `r_info`, and `r_info` with
/// the index replaced. MIPS64 little-endian files keep it in the low half.
struct RelInfo {
    is64: bool,
    mips64el: bool,
}

impl RelInfo {
    fn sym(&self, info: u64) -> u32 {
        match (self.is64, self.mips64el) {
            (false, _) => (info >> 8) as u32,
            (true, false) => (info >> 32) as u32,
            (true, true) => info as u32,
        }
    }
    fn with_sym(&self, info: u64, sym: u32) -> u64 {
        let sym = u64::from(sym);
        match (self.is64, self.mips64el) {
            (false, _) => (info & 0xff) | (sym << 8),
            (true, false) => (info & 0xffff_ffff) | (sym << 32),
            (true, true) => (info & !0xffff_ffff) | sym,
        }
    }
}

struct Model<'a> {
    file: ElfFile<'a>,
    secs: Vec<Sec<'a>>,
    syms: Vec<Sym<'a>>,
    symtab: Option<usize>,
    shndx_table: Option<usize>,
}

/// Rewrites `input`: drops the sections whose name satisfies `remove`,
/// appends `add`, and lays the file out as llvm-objcopy does.
pub fn rewrite<'a>(
    input: &'a [u8],
    remove: &dyn Fn(&[u8]) -> bool,
    add: Vec<NewSection<'a>>,
) -> Result<Plan<'a>, ElfError> {
    let file = ElfFile::parse(input)?;
    if file.header.phnum != 0 {
        return Err(ElfError::Unsupported(
            "the file has program headers (only relocatable objects are handled)".into(),
        ));
    }
    if file.sections.is_empty() || file.shstrndx == 0 {
        return Err(ElfError::Unsupported("the file has no section header table or no section name table".into()));
    }
    let mut model = Model::read(file)?;
    model.remove(remove)?;
    for s in add {
        model.secs.push(Sec {
            name: Cow::Owned(s.name),
            sh: SectionHeader {
                sh_type: SHT_PROGBITS,
                flags: SHF_EXCLUDE,
                offset: u64::MAX,
                size: s.data.len() as u64,
                align: 1,
                ..SectionHeader::default()
            },
            data: s.data,
            role: Role::Added,
            link: None,
            link_is_symtab: false,
            info: None,
            group: None,
            has_symbol: false,
            alive: true,
        });
    }
    model.write()
}

impl<'a> Model<'a> {
    fn read(file: ElfFile<'a>) -> Result<Model<'a>, ElfError> {
        let n = file.sections.len();
        let mut secs = Vec::with_capacity(n);
        let mut symtab = None;
        let mut shndx_table = None;
        for (i, sh) in file.sections.iter().enumerate() {
            let name = if i == 0 { &[][..] } else { file.section_name(i)? };
            let alloc = sh.flags & SHF_ALLOC != 0;
            let role = match sh.sh_type {
                _ if i == 0 => Role::Opaque,
                SHT_CREL => return Err(ElfError::Unsupported("SHT_CREL relocation sections".into())),
                SHT_REL | SHT_RELA if !alloc => Role::Reloc { rela: sh.sh_type == SHT_RELA },
                SHT_REL | SHT_RELA => Role::DynReloc,
                SHT_STRTAB if !alloc => Role::StrTab,
                SHT_SYMTAB => {
                    if symtab.replace(i).is_some() {
                        return Err(malformed("found multiple SHT_SYMTAB sections"));
                    }
                    Role::SymTab
                }
                SHT_SYMTAB_SHNDX => {
                    shndx_table = Some(i);
                    Role::Shndx
                }
                SHT_GROUP => Role::Group,
                SHT_HASH | SHT_GNU_HASH | SHT_DYNSYM | SHT_DYNAMIC | SHT_STRTAB => Role::Plain,
                _ if sh.flags & SHF_COMPRESSED != 0 => Role::Opaque,
                _ => Role::Plain,
            };
            let data = if i == 0 { &[][..] } else { file.section_data(i)? };
            secs.push(Sec {
                name: Cow::Borrowed(name),
                sh: *sh,
                data,
                role,
                link: None,
                link_is_symtab: false,
                info: None,
                group: None,
                has_symbol: false,
                alive: i != 0,
            });
        }
        if !matches!(secs.get(file.shstrndx).map(|s| s.role), Some(Role::StrTab)) {
            return Err(malformed(format!(
                "e_shstrndx {} does not refer to a non-allocated string table",
                file.shstrndx
            )));
        }
        let mut model = Model { file, secs, syms: Vec::new(), symtab, shndx_table };
        model.read_symbols()?;
        model.resolve_links()?;
        Ok(model)
    }

    fn section_ref(&self, index: u32, what: impl FnOnce() -> String) -> Result<usize, ElfError> {
        let i = index as usize;
        if i == 0 || i >= self.secs.len() {
            return Err(malformed(format!("{} is not a valid section index", what())));
        }
        Ok(i)
    }

    fn read_symbols(&mut self) -> Result<(), ElfError> {
        let Some(st) = self.symtab else { return Ok(()) };
        let c = self.file.codec;
        let sh = self.secs[st].sh;
        let strtab = self.section_ref(sh.link, || format!("the symbol table's sh_link {}", sh.link))?;
        if self.secs[strtab].role != Role::StrTab {
            return Err(malformed(format!("the symbol table's sh_link {} is not a string table", sh.link)));
        }
        let names = self.file.string_table(strtab)?;
        self.secs[st].link = Some(strtab);
        let size = c.sym_size();
        if sh.entsize != size as u64 {
            return Err(malformed(format!("the symbol table has sh_entsize {}, expected {size}", sh.entsize)));
        }
        let data = self.secs[st].data;
        if !data.len().is_multiple_of(size) {
            return Err(malformed(format!("the symbol table size {} is not a multiple of {size}", data.len())));
        }
        let count = data.len() / size;
        let xindex = match self.shndx_table {
            Some(t) => {
                let link = self.secs[t].sh.link as usize;
                if link != st {
                    return Err(malformed("SHT_SYMTAB_SHNDX does not refer to the symbol table"));
                }
                self.secs[t].link = Some(st);
                Some(self.secs[t].data)
            }
            None => None,
        };
        let machine = self.file.header.machine;
        let mut syms = Vec::with_capacity(count);
        for k in 0..count {
            let at = k * size;
            let (name, value, sz, info, other, shndx) = if c.is64 {
                (
                    c.u32(data, at),
                    c.u64(data, at + 8),
                    c.u64(data, at + 16),
                    data[at + 4],
                    data[at + 5],
                    c.u16(data, at + 6),
                )
            } else {
                (
                    c.u32(data, at),
                    c.u32(data, at + 4).map(u64::from),
                    c.u32(data, at + 8).map(u64::from),
                    data[at + 12],
                    data[at + 13],
                    c.u16(data, at + 14),
                )
            };
            let (Some(name), Some(value), Some(sz), Some(shndx)) = (name, value, sz, shndx) else {
                return Err(malformed(format!("symbol {k} is truncated")));
            };
            let name = c_string(names, name)
                .ok_or_else(|| malformed(format!("symbol {k} has a name offset {name:#x} past its string table")))?;
            let shown = || String::from_utf8_lossy(name).into_owned();
            let shndx = if shndx == SHN_XINDEX {
                let table = xindex.ok_or_else(|| {
                    malformed(format!(
                        "symbol '{}' has index SHN_XINDEX but no SHT_SYMTAB_SHNDX section exists",
                        shown()
                    ))
                })?;
                if table.len() / 4 != count {
                    return Err(malformed(
                        "symbol section index table does not have the same number of entries as the symbol table",
                    ));
                }
                let index = c.u32(table, k * 4).unwrap_or(0);
                Shndx::Section(self.section_ref(index, || format!("symbol '{}' section index {index}", shown()))?)
            } else if u32::from(shndx) >= SHN_LORESERVE {
                if !reserved_index_ok(shndx, machine) {
                    return Err(malformed(format!(
                        "symbol '{}' has unsupported value greater than or equal to SHN_LORESERVE: {shndx}",
                        shown()
                    )));
                }
                Shndx::Reserved(shndx)
            } else if shndx == SHN_UNDEF {
                Shndx::Undef
            } else {
                Shndx::Section(self.section_ref(u32::from(shndx), || format!("symbol '{}' section index", shown()))?)
            };
            if let Shndx::Section(s) = shndx {
                self.secs[s].has_symbol = true;
            }
            syms.push(Sym { name, info, other, shndx, value, size: sz });
        }
        self.syms = syms;
        Ok(())
    }

    fn resolve_links(&mut self) -> Result<(), ElfError> {
        let c = self.file.codec;
        let mips64el = c.is64 && !c.big && self.file.header.machine == EM_MIPS;
        let ri = RelInfo { is64: c.is64, mips64el };
        for i in 1..self.secs.len() {
            let sh = self.secs[i].sh;
            let shown = self.shown(i);
            let name = || shown.clone();
            match self.secs[i].role {
                Role::Plain | Role::DynReloc => {
                    if sh.link != 0 {
                        let l = self.section_ref(sh.link, || format!("sh_link {} of section '{}'", sh.link, name()))?;
                        self.secs[i].link = Some(l);
                        self.secs[i].link_is_symtab = self.secs[l].role == Role::SymTab;
                    }
                    if sh.info != 0 && self.secs[i].role == Role::DynReloc {
                        let t = self.section_ref(sh.info, || format!("sh_info {} of section '{}'", sh.info, name()))?;
                        self.secs[i].info = Some(t);
                    }
                }
                Role::Reloc { rela } => {
                    if sh.link != 0 {
                        let l = self.section_ref(sh.link, || format!("sh_link {} of section '{}'", sh.link, name()))?;
                        if self.secs[l].role != Role::SymTab {
                            return Err(malformed(format!("sh_link of section '{}' is not a symbol table", name())));
                        }
                        self.secs[i].link = Some(l);
                    }
                    if sh.info != 0 {
                        let t = self.section_ref(sh.info, || format!("sh_info {} of section '{}'", sh.info, name()))?;
                        self.secs[i].info = Some(t);
                    }
                    let size = c.rel_size(rela);
                    if sh.entsize != size as u64 {
                        return Err(malformed(format!(
                            "section '{}' has sh_entsize {}, expected {size}",
                            name(),
                            sh.entsize
                        )));
                    }
                    let data = self.secs[i].data;
                    if !data.len().is_multiple_of(size) {
                        return Err(malformed(format!("the size of section '{}' is not a multiple of {size}", name())));
                    }
                    for at in (0..data.len()).step_by(size) {
                        let info = c.word(data, at + c.word_size()).unwrap_or(0);
                        let sym = ri.sym(info) as usize;
                        if sym != 0 && sym >= self.syms.len() {
                            return Err(malformed(format!(
                                "relocation in section '{}' refers to symbol {sym}, but there are {} symbols",
                                name(),
                                self.syms.len()
                            )));
                        }
                    }
                }
                Role::Group => {
                    if !sh.align.is_multiple_of(4) {
                        return Err(malformed(format!("invalid alignment {} of group section '{}'", sh.align, name())));
                    }
                    if sh.link != 0 {
                        let l = self.section_ref(sh.link, || format!("sh_link {} of group '{}'", sh.link, name()))?;
                        if self.secs[l].role != Role::SymTab {
                            return Err(malformed(format!("sh_link of group '{}' is not a symbol table", name())));
                        }
                        if sh.info as usize >= self.syms.len() {
                            return Err(malformed(format!(
                                "sh_info {} of group '{}' is not a valid symbol index",
                                sh.info,
                                name()
                            )));
                        }
                        self.secs[i].link = Some(l);
                    }
                    let data = self.secs[i].data;
                    if data.is_empty() || !data.len().is_multiple_of(4) {
                        return Err(malformed(format!("the content of the section {} is malformed", name())));
                    }
                    let flag = c.u32(data, 0).unwrap_or(0);
                    let mut members = Vec::with_capacity(data.len() / 4 - 1);
                    for at in (4..data.len()).step_by(4) {
                        let m = c.u32(data, at).unwrap_or(0);
                        members.push(self.section_ref(m, || format!("group member {m} in section '{}'", name()))?);
                    }
                    self.secs[i].group = Some((flag, members));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn shown(&self, id: usize) -> String {
        String::from_utf8_lossy(&self.secs[id].name).into_owned()
    }

    /// Removes sections as `llvm-objcopy --remove-section` does.
    fn remove(&mut self, pred: &dyn Fn(&[u8]) -> bool) -> Result<(), ElfError> {
        let matched: Vec<bool> = self.secs.iter().enumerate().map(|(i, s)| i != 0 && pred(&s.name)).collect();
        // Relocations of removed sections and groups left empty go too.
        let dead: Vec<bool> = self
            .secs
            .iter()
            .zip(&matched)
            .map(|(s, &m)| {
                m || match (s.role, s.info, &s.group) {
                    (Role::Reloc { .. }, Some(t), _) => matched[t],
                    (_, _, Some((_, members))) => members.iter().all(|&m| matched[m]),
                    _ => false,
                }
            })
            .collect();
        self.apply_removal(&dead)
    }

    fn apply_removal(&mut self, dead: &[bool]) -> Result<(), ElfError> {
        if !dead.iter().any(|&d| d) {
            return Ok(());
        }
        // Members of a removed group are no longer in a group.
        let orphans: Vec<usize> = (1..self.secs.len())
            .filter(|&i| dead[i])
            .filter_map(|i| self.secs[i].group.as_ref())
            .flat_map(|(_, members)| members.iter().copied())
            .collect();
        for m in orphans {
            self.secs[m].sh.flags &= !SHF_GROUP;
        }
        if self.file.shstrndx < dead.len() && dead[self.file.shstrndx] {
            return Err(refused(
                "cannot write section header table because section header string table was removed".into(),
            ));
        }
        for i in 1..self.secs.len() {
            if dead[i] || !self.secs[i].alive {
                continue;
            }
            let s = &self.secs[i];
            match s.role {
                Role::Plain | Role::DynReloc => {
                    if let Some(l) = s.link.filter(|&l| dead[l] && !s.link_is_symtab) {
                        return Err(refused(format!(
                            "section '{}' cannot be removed because it is referenced by the section '{}'",
                            self.shown(l),
                            self.shown(i)
                        )));
                    }
                }
                Role::SymTab => {
                    if let Some(l) = s.link.filter(|&l| dead[l]) {
                        return Err(refused(format!(
                            "string table '{}' cannot be removed because it is referenced by the symbol table '{}'",
                            self.shown(l),
                            self.shown(i)
                        )));
                    }
                }
                Role::Reloc { .. } | Role::Group => {
                    if let Some(l) = s.link.filter(|&l| dead[l]) {
                        return Err(refused(format!(
                            "symbol table '{}' cannot be removed because it is referenced by the section '{}'",
                            self.shown(l),
                            self.shown(i)
                        )));
                    }
                }
                _ => {}
            }
            if let Role::Reloc { rela } = s.role {
                self.check_relocations(i, rela, dead)?;
            }
            if let Role::Group = s.role {
                let sym = s.sh.info as usize;
                if let Some(Sym { shndx: Shndx::Section(d), name, .. }) = self.syms.get(sym)
                    && s.link.is_some()
                    && dead[*d]
                {
                    return Err(refused(format!(
                        "symbol '{}' cannot be removed because it is referenced by the section '{}'",
                        String::from_utf8_lossy(name),
                        self.shown(i)
                    )));
                }
            }
        }
        for i in 1..self.secs.len() {
            if dead[i] {
                self.secs[i].alive = false;
            } else if let Some((_, members)) = &mut self.secs[i].group {
                members.retain(|&m| !dead[m]);
            }
        }
        if self.symtab.is_some_and(|s| dead[s]) {
            self.symtab = None;
        }
        if self.shndx_table.is_some_and(|s| dead[s]) {
            self.shndx_table = None;
        }
        Ok(())
    }

    fn check_relocations(&self, i: usize, rela: bool, dead: &[bool]) -> Result<(), ElfError> {
        let c = self.file.codec;
        let ri = RelInfo { is64: c.is64, mips64el: c.is64 && !c.big && self.file.header.machine == EM_MIPS };
        let data = self.secs[i].data;
        for at in (0..data.len()).step_by(c.rel_size(rela)) {
            let info = c.word(data, at + c.word_size()).unwrap_or(0);
            if let Some(Sym { shndx: Shndx::Section(d), name, .. }) = self.syms.get(ri.sym(info) as usize)
                && ri.sym(info) != 0
                && dead[*d]
            {
                let target = self.secs[i].info.map(|t| self.shown(t)).unwrap_or_default();
                return Err(refused(format!(
                    "section '{}' cannot be removed: ({target}+{:#x}) has relocation against symbol '{}'",
                    self.shown(*d),
                    c.word(data, at).unwrap_or(0),
                    String::from_utf8_lossy(name)
                )));
            }
        }
        Ok(())
    }
}

/// The output side: indices, sizes, layout and bytes.
impl<'a> Model<'a> {
    fn write(mut self) -> Result<Plan<'a>, ElfError> {
        let c = self.file.codec;
        // Symbols defined in removed sections go; the rest are renumbered.
        let mut sym_map: Vec<Option<u32>> = Vec::with_capacity(self.syms.len());
        let mut kept_syms = Vec::with_capacity(self.syms.len());
        for (k, s) in self.syms.drain(..).enumerate() {
            let keep = k == 0 || !matches!(s.shndx, Shndx::Section(d) if !self.secs[d].alive);
            sym_map.push(keep.then_some(kept_syms.len() as u32));
            if keep {
                kept_syms.push(s);
            }
        }
        let indices_changed = sym_map.iter().enumerate().any(|(k, m)| *m != Some(k as u32));
        self.syms = kept_syms;

        // Extended section numbering: a section index table is needed when a
        // section at index 0xff00 or above holds symbols.
        let alive: Vec<usize> = (1..self.secs.len()).filter(|&i| self.secs[i].alive).collect();
        let needs_large = alive.len() >= SHN_LORESERVE as usize
            && alive[SHN_LORESERVE as usize - 1..].iter().any(|&i| self.secs[i].has_symbol);
        if needs_large {
            if let (Some(st), None) = (self.symtab, self.shndx_table) {
                self.secs.push(Sec {
                    name: Cow::Borrowed(b".symtab_shndx"),
                    sh: SectionHeader {
                        sh_type: SHT_SYMTAB_SHNDX,
                        offset: u64::MAX,
                        align: 4,
                        entsize: 4,
                        ..SectionHeader::default()
                    },
                    data: &[],
                    role: Role::Shndx,
                    link: Some(st),
                    link_is_symtab: false,
                    info: None,
                    group: None,
                    has_symbol: false,
                    alive: true,
                });
                self.shndx_table = Some(self.secs.len() - 1);
            }
        } else if let Some(t) = self.shndx_table {
            let mut dead = vec![false; self.secs.len()];
            dead[t] = true;
            self.apply_removal(&dead)?;
        }

        let order: Vec<usize> = (1..self.secs.len()).filter(|&i| self.secs[i].alive).collect();
        let mut new_index = vec![0u32; self.secs.len()];
        for (k, &i) in order.iter().enumerate() {
            new_index[i] = k as u32 + 1;
        }

        // String tables.
        let shstrtab = self.file.shstrndx;
        let symstr = self.symtab.and_then(|s| self.secs[s].link);
        let mut tables: Vec<(usize, StringTable<'_>)> = order
            .iter()
            .filter(|&&i| self.secs[i].role == Role::StrTab)
            .map(|&i| (i, StringTable::default()))
            .collect();
        for (i, table) in &mut tables {
            if *i == shstrtab {
                for &j in &order {
                    table.add(&self.secs[j].name);
                }
            }
            if Some(*i) == symstr {
                for s in &self.syms {
                    table.add(s.name);
                }
            }
            table.finish().map_err(|n| ElfError::Unsupported(format!("a string table of {n} bytes")))?;
        }
        let table_of = |i: usize| tables.iter().find(|(t, _)| *t == i).map(|(_, t)| t);

        // Contents of the rebuilt sections, and every header.
        let mips64el = c.is64 && !c.big && self.file.header.machine == EM_MIPS;
        let ri = RelInfo { is64: c.is64, mips64el };
        let mut built: Vec<Option<Vec<u8>>> = vec![None; self.secs.len()];
        let mut headers: Vec<SectionHeader> = vec![SectionHeader::default(); self.secs.len()];
        let max_local =
            self.syms.iter().enumerate().filter(|(_, s)| s.info >> 4 == STB_LOCAL).map(|(k, _)| k).max().unwrap_or(0);
        let symtab_index = self.symtab.map(|s| new_index[s]).unwrap_or(0);
        for &i in &order {
            let s = &self.secs[i];
            let mut sh = s.sh;
            let link_of = |l: Option<usize>| l.filter(|&l| self.secs[l].alive).map(|l| new_index[l]).unwrap_or(0);
            match s.role {
                Role::Plain => {
                    sh.link =
                        if s.link_is_symtab { if indices_changed { 0 } else { symtab_index } } else { link_of(s.link) };
                }
                Role::DynReloc => {
                    sh.link = link_of(s.link);
                    if let Some(t) = s.info {
                        sh.info = link_of(Some(t));
                    }
                }
                Role::Opaque | Role::Added => {}
                Role::StrTab => {
                    let t = table_of(i).map(|t| t.len()).unwrap_or(1);
                    sh.size = t;
                }
                Role::SymTab => {
                    let mut out = Vec::with_capacity(self.syms.len() * c.sym_size());
                    let names = s.link.and_then(table_of);
                    for sym in &self.syms {
                        let name = names.map(|t| t.offset(sym.name)).unwrap_or(0);
                        let shndx = match sym.shndx {
                            Shndx::Undef => 0,
                            Shndx::Reserved(r) => r,
                            Shndx::Section(d) if new_index[d] >= SHN_LORESERVE => SHN_XINDEX,
                            Shndx::Section(d) => new_index[d] as u16,
                        };
                        c.put_u32(&mut out, name);
                        if c.is64 {
                            out.extend_from_slice(&[sym.info, sym.other]);
                            c.put_u16(&mut out, shndx);
                            c.put_u64(&mut out, sym.value);
                            c.put_u64(&mut out, sym.size);
                        } else {
                            c.put_u32(&mut out, sym.value as u32);
                            c.put_u32(&mut out, sym.size as u32);
                            out.extend_from_slice(&[sym.info, sym.other]);
                            c.put_u16(&mut out, shndx);
                        }
                    }
                    sh.link = link_of(s.link);
                    sh.info = max_local as u32 + 1;
                    sh.entsize = c.sym_size() as u64;
                    sh.align = c.word_size() as u64;
                    sh.size = out.len() as u64;
                    built[i] = Some(out);
                }
                Role::Shndx => {
                    let mut out = Vec::with_capacity(self.syms.len() * 4);
                    for sym in &self.syms {
                        let v = match sym.shndx {
                            Shndx::Section(d) if new_index[d] >= SHN_LORESERVE => new_index[d],
                            _ => 0,
                        };
                        c.put_u32(&mut out, v);
                    }
                    sh.link = symtab_index;
                    sh.size = out.len() as u64;
                    built[i] = Some(out);
                }
                Role::Reloc { rela } => {
                    let size = c.rel_size(rela);
                    if indices_changed {
                        let mut out = Vec::with_capacity(s.data.len());
                        for at in (0..s.data.len()).step_by(size) {
                            let w = c.word_size();
                            let info = c.word(s.data, at + w).unwrap_or(0);
                            let old = ri.sym(info) as usize;
                            let new = if old == 0 { 0 } else { sym_map.get(old).copied().flatten().unwrap_or(0) };
                            out.extend_from_slice(&s.data[at..at + w]);
                            c.put_word(&mut out, ri.with_sym(info, new));
                            out.extend_from_slice(&s.data[at + 2 * w..at + size]);
                        }
                        built[i] = Some(out);
                    }
                    sh.link = link_of(s.link);
                    if let Some(t) = s.info {
                        sh.info = new_index[t];
                    }
                    sh.entsize = size as u64;
                    sh.align = c.word_size() as u64;
                }
                Role::Group => {
                    let (mut flag, members) = s.group.clone().unwrap_or_default();
                    let sig = sym_map.get(s.sh.info as usize).copied().flatten();
                    if s.link.is_some() {
                        let local =
                            sig.and_then(|k| self.syms.get(k as usize)).is_some_and(|y| y.info >> 4 == STB_LOCAL);
                        if local {
                            flag &= !GRP_COMDAT;
                        }
                        sh.info = sig.unwrap_or(0);
                    } else {
                        sh.info = 0;
                    }
                    let mut out = Vec::with_capacity(4 + 4 * members.len());
                    c.put_u32(&mut out, flag);
                    for m in members {
                        c.put_u32(&mut out, new_index[m]);
                    }
                    sh.link = link_of(s.link);
                    sh.size = out.len() as u64;
                    built[i] = Some(out);
                }
            }
            headers[i] = sh;
        }

        // Layout: after the ELF header, sections in original-offset order.
        let mut by_offset = order.clone();
        by_offset.sort_by_key(|&i| self.secs[i].sh.offset);
        let mut offset = c.ehdr_size() as u64;
        let mut plan = Plan::new();
        let mut placed: Vec<(u64, usize)> = Vec::with_capacity(by_offset.len());
        for &i in &by_offset {
            let sh = &mut headers[i];
            let align = sh.align.max(1);
            offset = offset.checked_next_multiple_of(align).ok_or_else(|| malformed("section alignment overflows"))?;
            sh.offset = offset;
            if sh.sh_type != SHT_NOBITS {
                placed.push((offset, i));
                offset = offset.checked_add(sh.size).ok_or_else(|| malformed("section sizes overflow"))?;
            }
        }
        let shoff = offset.next_multiple_of(c.word_size() as u64);
        // Alignment padding is the only part of the output not backed by
        // input or added bytes; a hostile alignment must not make us write
        // terabytes of zeros.
        let backed = order
            .iter()
            .filter(|&&i| headers[i].sh_type != SHT_NOBITS)
            .fold(self.file.data.len() as u64, |sum, &i| sum.saturating_add(headers[i].size));
        if shoff > backed.saturating_add(1 << 30) {
            return Err(ElfError::Unsupported(format!("the section alignments would pad the output to {shoff} bytes")));
        }

        // Names go in last: every size is known now.
        if let Some(names) = table_of(shstrtab) {
            for &i in &order {
                headers[i].name = names.offset(&self.secs[i].name);
            }
        }

        let shnum = order.len() as u64 + 1;
        let shstrndx = new_index[shstrtab];
        plan.own(self.elf_header(shoff, shnum, shstrndx));
        let mut pos = c.ehdr_size() as u64;
        let mut tables: Vec<(usize, Vec<u8>)> = tables.into_iter().map(|(i, t)| (i, t.into_bytes())).collect();
        for (at, i) in placed {
            plan.zeros(at - pos);
            if let Some(k) = tables.iter().position(|(t, _)| *t == i) {
                plan.own(tables.swap_remove(k).1);
            } else if let Some(bytes) = built[i].take() {
                plan.own(bytes);
            } else {
                plan.borrow(self.secs[i].data);
            }
            pos = at + headers[i].size;
        }
        plan.zeros(shoff - pos);
        let mut sht = Vec::with_capacity(shnum as usize * c.shdr_size());
        let null = SectionHeader {
            size: if shnum >= u64::from(SHN_LORESERVE) { shnum } else { 0 },
            link: if shstrndx >= SHN_LORESERVE { shstrndx } else { 0 },
            ..SectionHeader::default()
        };
        c.put_shdr(&mut sht, &null);
        for &i in &order {
            c.put_shdr(&mut sht, &headers[i]);
        }
        plan.own(sht);
        Ok(plan)
    }

    fn elf_header(&self, shoff: u64, shnum: u64, shstrndx: u32) -> Vec<u8> {
        let c = self.file.codec;
        let h = &self.file.header;
        let mut out = Vec::with_capacity(c.ehdr_size());
        out.extend_from_slice(b"\x7fELF");
        out.extend_from_slice(&[if c.is64 { 2 } else { 1 }, if c.big { 2 } else { 1 }, 1, h.osabi, h.abi_version]);
        out.resize(16, 0);
        c.put_u16(&mut out, h.e_type);
        c.put_u16(&mut out, h.machine);
        c.put_u32(&mut out, h.version);
        c.put_word(&mut out, h.entry);
        c.put_word(&mut out, 0); // e_phoff
        c.put_word(&mut out, shoff);
        c.put_u32(&mut out, h.flags);
        c.put_u16(&mut out, c.ehdr_size() as u16);
        c.put_u16(&mut out, 0); // e_phentsize
        c.put_u16(&mut out, 0); // e_phnum
        c.put_u16(&mut out, c.shdr_size() as u16);
        c.put_u16(&mut out, if shnum >= u64::from(SHN_LORESERVE) { 0 } else { shnum as u16 });
        c.put_u16(&mut out, if shstrndx >= SHN_LORESERVE { SHN_XINDEX } else { shstrndx as u16 });
        out
    }
}
