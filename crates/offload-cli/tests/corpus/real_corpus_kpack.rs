//! `offload split --kpack` on a real library of the corpus:
//! `rocm6-fastllm/libfastllm_tools.so`, linked by lld with `.hip_fatbin`
//! in a PT_LOAD mapped 0x149000 above its offset, so the longer program
//! header table cannot sit at the first PT_LOAD's address-to-offset
//! distance (docs/formats/kpack.md, "Writing"). The split must succeed,
//! join back byte for byte, serve every GPU the bytes the fat library
//! gives it, and keep a program header table ld.so accepts. Ignored
//! without the corpus, failing under `OFFLOAD_REQUIRE_REAL_CORPUS=1`.

use crate::inspect_support;
use crate::real_corpus_support;

use inspect_support::{list_json, offload, s};
use offload_format::elf::segments::{self, PT_LOAD, PT_PHDR};
use offload_testkit::files_under;
use real_corpus_support::Corpus;
use std::collections::BTreeSet;
use std::path::Path;

/// What `offload extract --gpu` writes for `gpu` from `file`: exit code
/// and the files' bytes, sorted.
fn extract(file: &Path, gpu: &str, work: &Path) -> (Option<i32>, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir_in(work).unwrap();
    let o = offload(&["extract", "--gpu", gpu, "--output-dir", dir.path().to_str().unwrap(), file.to_str().unwrap()]);
    let mut files: Vec<Vec<u8>> = files_under(dir.path()).iter().map(|p| std::fs::read(p).unwrap()).collect();
    files.sort();
    (o.status.code(), files)
}

#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn kpack_split_of_an_lld_library_loads_serves_and_joins_back() {
    let corpus = Corpus::get();
    let fat = corpus.files().into_iter().find(|f| f.ends_with("rocm6-fastllm/libfastllm_tools.so")).unwrap();
    let input = std::fs::read(&fat).unwrap();
    let (_, before) = segments::read(&input).unwrap();
    let loads: Vec<_> = before.iter().filter(|p| p.kind == PT_LOAD).collect();
    let bias = |p: &segments::Segment| p.vaddr.wrapping_sub(p.offset);
    assert_ne!(bias(loads[0]), bias(loads.last().unwrap()), "the premise");

    let work = tempfile::tempdir().unwrap();
    let out_dir = work.path().join("split");
    let o = offload(&["split", "--kpack", fat.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let split = out_dir.join("libfastllm_tools.so");
    let host = std::fs::read(&split).unwrap();
    assert!(host.len() * 4 < input.len(), "{} -> {}", input.len(), host.len());

    // A table ld.so accepts: PT_PHDR first, where e_phoff is, inside a
    // PT_LOAD mapping it at PT_PHDR's address; PT_LOADs sorted, congruent
    // and apart.
    let (phoff, after) = segments::read(&host).unwrap();
    segments::check_loads(&after, host.len() as u64).unwrap();
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[0].kind, PT_PHDR);
    assert_eq!((after[0].offset, after[0].filesz), (phoff, after.len() as u64 * 56));
    assert_eq!(segments::file_offset(&after, after[0].vaddr, after[0].filesz), Some(phoff));

    // Every target the fat library holds: the split serves the same bytes.
    let targets: BTreeSet<String> =
        list_json(&fat).iter().map(|r| s(r, "target_id").to_string()).filter(|t| !t.is_empty()).collect();
    assert_eq!(targets.len(), 7, "{targets:?}");
    let mut served = 0;
    for t in &targets {
        let (a, b) = (extract(&fat, t, work.path()), extract(&split, t, work.path()));
        assert_eq!(a.0, b.0, "{t}");
        assert_eq!(a.1, b.1, "{t}");
        served += a.1.len();
    }
    assert_eq!(served, 14, "two fat binaries, one code object per target in each");

    // The join gives back the input byte for byte.
    let joined = work.path().join("joined.so");
    let o = offload(&["join", split.to_str().unwrap(), "-o", joined.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&joined).unwrap() == input, "the join differs from the input");
}
