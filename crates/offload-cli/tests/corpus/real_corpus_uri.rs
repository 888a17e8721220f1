//! Code-object URIs on the real ROCm libraries of `real_corpus.rs` (and
//! the wheels and .deb they come from): every `uri` that `offload` prints
//! extracts, through `offload extract URI`, to the bytes `offload extract`
//! writes for that code object; and `verify` finds every fat binary
//! registered by a `.hipFatBinSegment` record. Ignored without the corpus,
//! failing under `OFFLOAD_REQUIRE_REAL_CORPUS=1`.

use crate::inspect_support;
use crate::real_corpus_support;
use crate::uri_support;

use inspect_support::offload;
use real_corpus_support::Corpus;
use uri_support::round_trip;

#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn every_uri_in_the_corpus_extracts_to_its_code_object() {
    let corpus = Corpus::get();
    let tmp = tempfile::tempdir().unwrap();
    let (mut same, mut compressed) = (0, 0);
    let mut inputs = corpus.files();
    inputs.extend(corpus.packages().into_iter().map(|(package, _)| package));
    for (i, file) in inputs.iter().enumerate() {
        let trip = round_trip(file, &tmp.path().join(i.to_string()));
        // Libraries always have a range; packages only for stored members.
        if corpus.files().contains(file) {
            assert_eq!(trip.without, 0, "{}: {trip:?}", file.display());
            assert!(trip.same > 0, "{}: {trip:?}", file.display());
        }
        eprintln!("{}: {trip:?}", file.display());
        same += trip.same;
        compressed += trip.compressed;
    }
    eprintln!("corpus URIs: {same} code objects extracted alike by URI, {compressed} of them in compressed bundles");
    assert!(compressed > 0 && same > compressed);
}

#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn every_corpus_fat_binary_is_registered() {
    let corpus = Corpus::get();
    for file in corpus.files() {
        let out = offload(&["verify", file.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && !text.contains("regist"), "{}: {text}", file.display());
    }
}
