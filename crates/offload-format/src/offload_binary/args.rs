//! The `--image=key=value,...` arguments of `clang-offload-packager` and the
//! order in which LLVM writes the resulting string records.
//!
//! The string is split at every `,`; each piece at its first `=` into key
//! and value (no `=`: empty value). A repeated key gets its new value
//! appended after a `,` (`arch=a,arch=b` gives `a,b`). LLVM keeps the pairs
//! in a `DenseMap<StringRef, StringRef>` and writes the records in that map's
//! iteration order (LLVM 19), or re-inserts them, in that order, into a
//! `StringMap` and writes them in its order (LLVM 16). `file` and `kind`
//! are not written as records.

use super::OffloadKind;
use crate::llvm_hash;

/// Which LLVM release's record order to reproduce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordOrder {
    /// LLVM 17 to 19: the `DenseMap` order (the default).
    #[default]
    Llvm19,
    /// LLVM 15 and 16: the djb-hashed `StringMap` order.
    Llvm16,
}

/// The parsed key/value pairs of one `--image` argument.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageArgs {
    /// Distinct keys with their (joined) values, in order of first use.
    pairs: Vec<(String, String)>,
}

impl ImageArgs {
    /// Parses a packager `--image` value: `key=value` pairs separated by
    /// commas; a key given twice gets its values joined with a comma, a
    /// piece without `=` is a key with an empty value.
    pub fn parse(spec: &str) -> Self {
        Self::from_pairs(spec.split(',').map(|piece| piece.split_once('=').unwrap_or((piece, ""))))
    }

    /// The arguments of `key=value` pairs given one by one (keys and values
    /// may hold `,` and `=`), joined as [`ImageArgs::parse`] joins them.
    pub fn from_pairs<'a>(given: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (key, value) in given {
            match pairs.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) => {
                    v.push(',');
                    v.push_str(value);
                }
                None => pairs.push((key.to_string(), value.to_string())),
            }
        }
        ImageArgs { pairs }
    }

    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Whether `key` was given.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs in order of first use.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The pairs in LLVM's `DenseMap` iteration order.
    pub fn dense_map_order(&self) -> Vec<(&str, &str)> {
        let keys: Vec<&str> = self.pairs.iter().map(|(k, _)| k.as_str()).collect();
        llvm_hash::dense_map_order(&keys).into_iter().map(|i| (keys[i], self.pairs[i].1.as_str())).collect()
    }

    /// The string records LLVM writes for these arguments (every key but
    /// `file` and `kind`), in the given release's order.
    pub fn string_records(&self, order: RecordOrder) -> Vec<(&str, &str)> {
        let records: Vec<(&str, &str)> =
            self.dense_map_order().into_iter().filter(|(k, _)| *k != "file" && *k != "kind").collect();
        match order {
            RecordOrder::Llvm19 => records,
            RecordOrder::Llvm16 => {
                let keys: Vec<&str> = records.iter().map(|(k, _)| *k).collect();
                llvm_hash::string_map_order(&keys).into_iter().map(|i| records[i]).collect()
            }
        }
    }

    /// The files of a packaging argument: LLVM 19 splits the (joined)
    /// `file` value at commas, one binary per file.
    pub fn files(&self) -> Vec<&str> {
        self.get("file").map(|f| f.split(',').collect()).unwrap_or_default()
    }

    /// The offload kind named by `kind` (None when absent or unknown).
    pub fn offload_kind(&self) -> OffloadKind {
        self.get("kind").map(OffloadKind::from_name).unwrap_or(OffloadKind::None)
    }

    /// The offload kind `kind` names for `release`'s packager (LLVM 22
    /// knows `sycl`); None when absent or unknown.
    pub fn offload_kind_in(&self, release: crate::llvm_release::LlvmRelease) -> OffloadKind {
        self.get("kind").map_or(OffloadKind::None, |k| release.offload_kind_from_name(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_and_joining() {
        let a = ImageArgs::parse("file=a.bin,triple=t,novalue,arch=a,arch=b,=x,eq=a=b");
        let pairs: Vec<_> = a.pairs().collect();
        assert_eq!(
            pairs,
            [("file", "a.bin"), ("triple", "t"), ("novalue", ""), ("arch", "a,b"), ("", "x"), ("eq", "a=b")]
        );
        assert_eq!(ImageArgs::parse("").pairs().collect::<Vec<_>>(), [("", "")]);
        assert_eq!(ImageArgs::parse("file=a,file=b").files(), ["a", "b"]);
        assert_eq!(ImageArgs::parse("kind=openmp,kind=cuda").offload_kind(), OffloadKind::None);
        assert_eq!(ImageArgs::parse("kind=hip").offload_kind(), OffloadKind::Hip);
        use crate::llvm_release::LlvmRelease;
        assert_eq!(ImageArgs::parse("kind=sycl").offload_kind(), OffloadKind::None);
        assert_eq!(ImageArgs::parse("kind=sycl").offload_kind_in(LlvmRelease::Llvm22), OffloadKind::Sycl);
        assert_eq!(ImageArgs::parse("kind=sycl").offload_kind_in(LlvmRelease::Llvm19), OffloadKind::None);
        let given = ImageArgs::from_pairs([("file", "a,b"), ("k=1", "v,w"), ("k=1", "x")]);
        assert_eq!(given.pairs().collect::<Vec<_>>(), [("file", "a,b"), ("k=1", "v,w,x")]);
    }

    #[test]
    fn record_orders_of_the_spec_examples() {
        // Observed with LLVM 19 and LLVM 16 (packager-wrapper-spec 1.2, 1.3).
        let a = ImageArgs::parse("file=a.bin,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp");
        let keys = |o| a.string_records(o).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(RecordOrder::Llvm19), ["arch", "triple"]);
        assert_eq!(keys(RecordOrder::Llvm16), ["triple", "arch"]);
        let b =
            ImageArgs::parse("file=b.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip,feature=+xnack,feature=-sramecc");
        let keys = |o| b.string_records(o).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(RecordOrder::Llvm19), ["feature", "arch", "triple"]);
        assert_eq!(keys(RecordOrder::Llvm16), ["triple", "feature", "arch"]);
        // Observed with LLVM 19 for the "" key (conformance case 7).
        let c = ImageArgs::parse("file=a.bin,triple=t,novalue,arch=a,arch=b,=x,eq=a=b");
        let keys: Vec<_> = c.string_records(RecordOrder::Llvm19).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["eq", "", "arch", "triple", "novalue"]);
    }
}
