//! ELF string tables built the way LLVM's `StringTableBuilder` (ELF kind,
//! optimised) builds them, which is what llvm-objcopy writes: a leading NUL,
//! then the distinct strings ordered by their reversed bytes, largest
//! first, each string that is a suffix of the string before it sharing that
//! string's tail. The empty string is always at offset 0.

use std::collections::BTreeMap;

/// A string table under construction.
#[derive(Default, Debug)]
pub struct StringTable<'a> {
    offsets: BTreeMap<&'a [u8], u32>,
    bytes: Vec<u8>,
}

impl<'a> StringTable<'a> {
    pub fn add(&mut self, s: &'a [u8]) {
        if !s.is_empty() {
            self.offsets.insert(s, 0);
        }
    }

    /// Lays the table out; `Err` when it would exceed 4 GiB.
    pub fn finish(&mut self) -> Result<(), u64> {
        let mut strings: Vec<&'a [u8]> = self.offsets.keys().copied().collect();
        // Reversed-byte order, descending; a proper suffix sorts right
        // after the strings that end with it.
        strings.sort_unstable_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
        let mut bytes = vec![0u8];
        let mut previous: &[u8] = &[];
        for s in strings {
            let offset = if previous.ends_with(s) {
                bytes.len() - 1 - s.len()
            } else {
                let at = bytes.len();
                bytes.extend_from_slice(s);
                bytes.push(0);
                previous = s;
                at
            };
            let offset = u32::try_from(offset).map_err(|_| bytes.len() as u64)?;
            self.offsets.insert(s, offset);
        }
        u32::try_from(bytes.len()).map_err(|_| bytes.len() as u64)?;
        self.bytes = bytes;
        Ok(())
    }

    /// Offset of a string added before [`finish`](Self::finish).
    pub fn offset(&self, s: &[u8]) -> u32 {
        self.offsets.get(s).copied().unwrap_or(0)
    }

    pub fn into_bytes(self) -> Vec<u8> {
        if self.bytes.is_empty() { vec![0] } else { self.bytes }
    }

    pub fn len(&self) -> u64 {
        self.bytes.len().max(1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `.strtab` llvm-objcopy 19 wrote for a clang object (section and
    /// symbol names share the table there).
    #[test]
    fn matches_llvm_objcopy_on_a_clang_object() {
        let names: &[&[u8]] = &[
            b".strtab",
            b".text",
            b".rela.text",
            b".data",
            b".rodata.str1.1",
            b".comment",
            b".note.GNU-stack",
            b".eh_frame",
            b".rela.eh_frame",
            b".llvm_addrsig",
            b".symtab",
            b"__CLANG_OFFLOAD_BUNDLE__host-x86_64-unknown-linux-gnu-",
            b"__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx906",
            b"",
            b"h.c",
            b".L.str",
            b"main",
            b"g",
            b"printf",
        ];
        let mut t = StringTable::default();
        for n in names {
            t.add(n);
        }
        t.finish().unwrap();
        assert_eq!(t.offset(b""), 0);
        assert_eq!(t.offset(b"main"), 28);
        assert_eq!(t.offset(b"g"), 61);
        let expected: &[u8] = b"\0.rela.text\0.comment\0.L.str\0main\0.note.GNU-stack\0.llvm_addrsig\0printf\0.rela.eh_frame\0h.c\0.strtab\0.symtab\0.data\0__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx906\0.rodata.str1.1\0__CLANG_OFFLOAD_BUNDLE__host-x86_64-unknown-linux-gnu-\0";
        assert_eq!(t.into_bytes(), expected);
    }

    #[test]
    fn empty_table_is_one_nul() {
        let mut t = StringTable::default();
        t.add(b"");
        t.finish().unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.into_bytes(), [0]);
    }
}
