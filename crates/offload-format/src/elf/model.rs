//! The model llvm-objcopy 19 builds of an ELF file, read from the input:
//! what each section becomes (copied, or rebuilt from its entries), the
//! symbols, relocations and groups, and the removal of sections with the
//! references objcopy updates or refuses to break.

use super::*;
use std::borrow::Cow;

/// What objcopy turns a section into when it reads the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
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

pub(super) struct Sec<'a> {
    pub(super) name: Cow<'a, [u8]>,
    pub(super) sh: SectionHeader,
    pub(super) data: &'a [u8],
    pub(super) role: Role,
    /// Section referred to by `sh_link` (for Plain, Reloc, Group: by id).
    pub(super) link: Option<usize>,
    /// `sh_link` names the symbol table (restored only if no symbol moved).
    pub(super) link_is_symtab: bool,
    /// Section referred to by `sh_info` (relocation target).
    pub(super) info: Option<usize>,
    /// Group: flag word and member ids.
    pub(super) group: Option<(u32, Vec<usize>)>,
    /// Some symbol is defined in this section.
    pub(super) has_symbol: bool,
    pub(super) alive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shndx {
    Undef,
    Reserved(u16),
    Section(usize),
}

pub(super) struct Sym<'a> {
    pub(super) name: &'a [u8],
    pub(super) info: u8,
    pub(super) other: u8,
    pub(super) shndx: Shndx,
    pub(super) value: u64,
    pub(super) size: u64,
}

pub(super) const GRP_COMDAT: u32 = 1;
pub use crate::elf::STB_LOCAL;

pub(super) fn refused(msg: String) -> ElfError {
    ElfError::Refused(msg)
}

pub(super) fn reserved_index_ok(index: u16, machine: u16) -> bool {
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
pub(super) struct RelInfo {
    pub(super) is64: bool,
    pub(super) mips64el: bool,
}

impl RelInfo {
    pub(super) fn sym(&self, info: u64) -> u32 {
        match (self.is64, self.mips64el) {
            (false, _) => (info >> 8) as u32,
            (true, false) => (info >> 32) as u32,
            (true, true) => info as u32,
        }
    }
    pub(super) fn with_sym(&self, info: u64, sym: u32) -> u64 {
        let sym = u64::from(sym);
        match (self.is64, self.mips64el) {
            (false, _) => (info & 0xff) | (sym << 8),
            (true, false) => (info & 0xffff_ffff) | (sym << 32),
            (true, true) => (info & !0xffff_ffff) | sym,
        }
    }
}

pub(super) struct Model<'a> {
    pub(super) file: ElfFile<'a>,
    pub(super) secs: Vec<Sec<'a>>,
    pub(super) syms: Vec<Sym<'a>>,
    pub(super) symtab: Option<usize>,
    pub(super) shndx_table: Option<usize>,
}

impl<'a> Model<'a> {
    pub(super) fn read(file: ElfFile<'a>) -> Result<Model<'a>, ElfError> {
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
                        let at = file.section_header_offset(i);
                        return Err(invalid(at, "section header", "found multiple SHT_SYMTAB sections"));
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
            let why = format!("e_shstrndx {} does not refer to a non-allocated string table", file.shstrndx);
            return Err(invalid(file.section_header_offset(file.shstrndx), "e_shstrndx", why));
        }
        let mut model = Model { file, secs, syms: Vec::new(), symtab, shndx_table };
        model.read_symbols()?;
        model.resolve_links()?;
        Ok(model)
    }

    /// Section `index` as a reference read at file offset `at` (`what`
    /// says which field, for the message).
    pub(super) fn section_ref(&self, index: u32, at: u64, what: impl FnOnce() -> String) -> Result<usize, ElfError> {
        let i = index as usize;
        if i == 0 || i >= self.secs.len() {
            return Err(invalid(at, "section index", format!("{} is not a valid section index", what())));
        }
        Ok(i)
    }

    pub(super) fn read_symbols(&mut self) -> Result<(), ElfError> {
        let Some(st) = self.symtab else { return Ok(()) };
        let c = self.file.codec;
        let sh = self.secs[st].sh;
        let header = self.file.section_header_offset(st);
        let strtab = self.section_ref(sh.link, header, || format!("the symbol table's sh_link {}", sh.link))?;
        if self.secs[strtab].role != Role::StrTab {
            let why = format!("the symbol table's sh_link {} is not a string table", sh.link);
            return Err(invalid(header, "sh_link", why));
        }
        let names = self.file.string_table(strtab)?;
        self.secs[st].link = Some(strtab);
        let size = c.sym_size();
        if sh.entsize != size as u64 {
            let why = format!("the symbol table has sh_entsize {}, expected {size}", sh.entsize);
            return Err(invalid(header, "sh_entsize", why));
        }
        let data = self.secs[st].data;
        if !data.len().is_multiple_of(size) {
            let why = format!("the symbol table size {} is not a multiple of {size}", data.len());
            return Err(invalid(header, "sh_size", why));
        }
        let count = data.len() / size;
        let xindex = match self.shndx_table {
            Some(t) => {
                let link = self.secs[t].sh.link as usize;
                if link != st {
                    let at = self.file.section_header_offset(t);
                    return Err(invalid(at, "sh_link", "SHT_SYMTAB_SHNDX does not refer to the symbol table"));
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
            let entry = sh.offset.saturating_add(at as u64);
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
                return Err(truncated(self.file.data, entry, size as u64, "symbol table entry"));
            };
            let name = c_string(names, name).ok_or_else(|| {
                invalid(entry, "symbol name", format!("symbol {k} has a name offset {name:#x} past its string table"))
            })?;
            let shown = || String::from_utf8_lossy(name).into_owned();
            let shndx = if shndx == SHN_XINDEX {
                let table = xindex.ok_or_else(|| {
                    let why =
                        format!("symbol '{}' has index SHN_XINDEX but no SHT_SYMTAB_SHNDX section exists", shown());
                    invalid(entry, "st_shndx", why)
                })?;
                if table.len() / 4 != count {
                    return Err(invalid(
                        self.shndx_table.map_or(0, |t| self.file.section_header_offset(t)),
                        "sh_size",
                        "symbol section index table does not have the same number of entries as the symbol table",
                    ));
                }
                let index = c.u32(table, k * 4).unwrap_or(0);
                let at = self.shndx_table.map_or(0, |t| self.secs[t].sh.offset).saturating_add(k as u64 * 4);
                Shndx::Section(self.section_ref(index, at, || format!("symbol '{}' section index {index}", shown()))?)
            } else if u32::from(shndx) >= SHN_LORESERVE {
                if !reserved_index_ok(shndx, machine) {
                    let why = format!(
                        "symbol '{}' has unsupported value greater than or equal to SHN_LORESERVE: {shndx}",
                        shown()
                    );
                    return Err(invalid(entry, "st_shndx", why));
                }
                Shndx::Reserved(shndx)
            } else if shndx == SHN_UNDEF {
                Shndx::Undef
            } else {
                let index = u32::from(shndx);
                Shndx::Section(self.section_ref(index, entry, || format!("symbol '{}' section index", shown()))?)
            };
            if let Shndx::Section(s) = shndx {
                self.secs[s].has_symbol = true;
            }
            syms.push(Sym { name, info, other, shndx, value, size: sz });
        }
        self.syms = syms;
        Ok(())
    }

    pub(super) fn resolve_links(&mut self) -> Result<(), ElfError> {
        let c = self.file.codec;
        let mips64el = c.is64 && !c.big && self.file.header.machine == EM_MIPS;
        let ri = RelInfo { is64: c.is64, mips64el };
        for i in 1..self.secs.len() {
            let sh = self.secs[i].sh;
            let shown = self.shown(i);
            let name = || shown.clone();
            let header = self.file.section_header_offset(i);
            match self.secs[i].role {
                Role::Plain | Role::DynReloc => {
                    if sh.link != 0 {
                        let l = self
                            .section_ref(sh.link, header, || format!("sh_link {} of section '{}'", sh.link, name()))?;
                        self.secs[i].link = Some(l);
                        self.secs[i].link_is_symtab = self.secs[l].role == Role::SymTab;
                    }
                    if sh.info != 0 && self.secs[i].role == Role::DynReloc {
                        let t = self
                            .section_ref(sh.info, header, || format!("sh_info {} of section '{}'", sh.info, name()))?;
                        self.secs[i].info = Some(t);
                    }
                }
                Role::Reloc { rela } => {
                    if sh.link != 0 {
                        let l = self
                            .section_ref(sh.link, header, || format!("sh_link {} of section '{}'", sh.link, name()))?;
                        if self.secs[l].role != Role::SymTab {
                            let why = format!("sh_link of section '{}' is not a symbol table", name());
                            return Err(invalid(header, "sh_link", why));
                        }
                        self.secs[i].link = Some(l);
                    }
                    if sh.info != 0 {
                        let t = self
                            .section_ref(sh.info, header, || format!("sh_info {} of section '{}'", sh.info, name()))?;
                        self.secs[i].info = Some(t);
                    }
                    let size = c.rel_size(rela);
                    if sh.entsize != size as u64 {
                        let why = format!("section '{}' has sh_entsize {}, expected {size}", name(), sh.entsize);
                        return Err(invalid(header, "sh_entsize", why));
                    }
                    let data = self.secs[i].data;
                    if !data.len().is_multiple_of(size) {
                        let why = format!("the size of section '{}' is not a multiple of {size}", name());
                        return Err(invalid(header, "sh_size", why));
                    }
                    for at in (0..data.len()).step_by(size) {
                        let info = c.word(data, at + c.word_size()).unwrap_or(0);
                        let sym = ri.sym(info) as usize;
                        if sym != 0 && sym >= self.syms.len() {
                            let why = format!(
                                "relocation in section '{}' refers to symbol {sym}, but there are {} symbols",
                                name(),
                                self.syms.len()
                            );
                            return Err(invalid(sh.offset.saturating_add(at as u64), "relocation", why));
                        }
                    }
                }
                Role::Group => {
                    if !sh.align.is_multiple_of(4) {
                        let why = format!("invalid alignment {} of group section '{}'", sh.align, name());
                        return Err(invalid(header, "sh_addralign", why));
                    }
                    if sh.link != 0 {
                        let l =
                            self.section_ref(sh.link, header, || format!("sh_link {} of group '{}'", sh.link, name()))?;
                        if self.secs[l].role != Role::SymTab {
                            let why = format!("sh_link of group '{}' is not a symbol table", name());
                            return Err(invalid(header, "sh_link", why));
                        }
                        if sh.info as usize >= self.syms.len() {
                            let why = format!("sh_info {} of group '{}' is not a valid symbol index", sh.info, name());
                            return Err(invalid(header, "sh_info", why));
                        }
                        self.secs[i].link = Some(l);
                    }
                    let data = self.secs[i].data;
                    if data.is_empty() || !data.len().is_multiple_of(4) {
                        let why = format!("the content of the section {} is malformed", name());
                        return Err(invalid(sh.offset, "group section", why));
                    }
                    let flag = c.u32(data, 0).unwrap_or(0);
                    let mut members = Vec::with_capacity(data.len() / 4 - 1);
                    for at in (4..data.len()).step_by(4) {
                        let m = c.u32(data, at).unwrap_or(0);
                        let at = sh.offset.saturating_add(at as u64);
                        members.push(self.section_ref(m, at, || format!("group member {m} in section '{}'", name()))?);
                    }
                    self.secs[i].group = Some((flag, members));
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) fn shown(&self, id: usize) -> String {
        String::from_utf8_lossy(&self.secs[id].name).into_owned()
    }

    /// Removes sections as `llvm-objcopy --remove-section` does.
    pub(super) fn remove(&mut self, pred: &dyn Fn(&[u8]) -> bool) -> Result<(), ElfError> {
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

    pub(super) fn apply_removal(&mut self, dead: &[bool]) -> Result<(), ElfError> {
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

    pub(super) fn check_relocations(&self, i: usize, rela: bool, dead: &[bool]) -> Result<(), ElfError> {
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
