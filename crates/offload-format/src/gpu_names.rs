//! What a person types for a GPU, and what the tools call it: warnings for
//! processor names and CUDA architectures no release knows, with a
//! suggestion for a case slip (`GFX90A`, `SM_89`), a missing underscore
//! (`sm89`), a near miss (`gfx9000`) or a product name (`MI300X` is
//! `gfx942`, `RTX 4090` is `sm_89`).
//!
//! The product table is data: [`PRODUCTS`], each row with its source
//! (docs/reference/gpu-names.md lists them and says where they come from).

use crate::amdgpu;

/// A GPU product and the processor or architecture its code is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Product {
    /// The product as its maker writes it (`Instinct MI300X`, `GeForce RTX 4090`).
    pub name: &'static str,
    /// The AMDGPU processor (`gfx942`) or CUDA architecture (`sm_89`).
    pub target: &'static str,
}

const fn p(name: &'static str, target: &'static str) -> Product {
    Product { name, target }
}

/// Products by processor: AMD's from the processor table of LLVM's AMDGPU
/// usage page (llvm.org/docs/AMDGPUUsage.html, "Processors") and ROCm's
/// GPU specification tables (rocm.docs.amd.com, "GPU hardware
/// specifications"); NVIDIA's from NVIDIA's compute capability list
/// (developer.nvidia.com/cuda-gpus). See docs/reference/gpu-names.md.
pub const PRODUCTS: &[Product] = &[
    // AMD Instinct
    p("Instinct MI25", "gfx900"),
    p("Instinct MI50", "gfx906"),
    p("Instinct MI60", "gfx906"),
    p("Instinct MI100", "gfx908"),
    p("Instinct MI210", "gfx90a"),
    p("Instinct MI250", "gfx90a"),
    p("Instinct MI250X", "gfx90a"),
    p("Instinct MI300A", "gfx942"),
    p("Instinct MI300X", "gfx942"),
    p("Instinct MI325X", "gfx942"),
    p("Instinct MI350X", "gfx950"),
    p("Instinct MI355X", "gfx950"),
    // AMD Radeon
    p("Radeon RX Vega 56", "gfx900"),
    p("Radeon RX Vega 64", "gfx900"),
    p("Radeon VII", "gfx906"),
    p("Radeon Pro VII", "gfx906"),
    p("Radeon RX 5700 XT", "gfx1010"),
    p("Radeon RX 5700", "gfx1010"),
    p("Radeon RX 5500 XT", "gfx1012"),
    p("Radeon RX 6950 XT", "gfx1030"),
    p("Radeon RX 6900 XT", "gfx1030"),
    p("Radeon RX 6800 XT", "gfx1030"),
    p("Radeon RX 6800", "gfx1030"),
    p("Radeon Pro W6800", "gfx1030"),
    p("Radeon Pro V620", "gfx1030"),
    p("Radeon RX 6750 XT", "gfx1031"),
    p("Radeon RX 6700 XT", "gfx1031"),
    p("Radeon RX 6650 XT", "gfx1032"),
    p("Radeon RX 6600 XT", "gfx1032"),
    p("Radeon RX 6600", "gfx1032"),
    p("Radeon RX 7900 XTX", "gfx1100"),
    p("Radeon RX 7900 XT", "gfx1100"),
    p("Radeon RX 7900 GRE", "gfx1100"),
    p("Radeon Pro W7900", "gfx1100"),
    p("Radeon Pro W7800", "gfx1100"),
    p("Radeon RX 7800 XT", "gfx1101"),
    p("Radeon RX 7700 XT", "gfx1101"),
    p("Radeon RX 7600 XT", "gfx1102"),
    p("Radeon RX 7600", "gfx1102"),
    p("Radeon 780M", "gfx1103"),
    p("Radeon 8060S", "gfx1151"),
    p("Radeon RX 9070 XT", "gfx1201"),
    p("Radeon RX 9070", "gfx1201"),
    p("Radeon RX 9060 XT", "gfx1200"),
    // NVIDIA data centre
    p("Tesla P100", "sm_60"),
    p("Tesla V100", "sm_70"),
    p("Tesla T4", "sm_75"),
    p("A100", "sm_80"),
    p("A30", "sm_80"),
    p("A40", "sm_86"),
    p("A10", "sm_86"),
    p("L4", "sm_89"),
    p("L40", "sm_89"),
    p("L40S", "sm_89"),
    p("H100", "sm_90"),
    p("H200", "sm_90"),
    p("GH200", "sm_90"),
    p("B200", "sm_100"),
    p("GB200", "sm_100"),
    p("B300", "sm_103"),
    // NVIDIA GeForce and workstation
    p("GeForce GTX 1080 Ti", "sm_61"),
    p("GeForce GTX 1080", "sm_61"),
    p("GeForce GTX 1070", "sm_61"),
    p("GeForce GTX 1060", "sm_61"),
    p("Titan V", "sm_70"),
    p("GeForce RTX 2080 Ti", "sm_75"),
    p("GeForce RTX 2080", "sm_75"),
    p("GeForce RTX 2070", "sm_75"),
    p("GeForce RTX 2060", "sm_75"),
    p("GeForce GTX 1660", "sm_75"),
    p("GeForce RTX 3090", "sm_86"),
    p("GeForce RTX 3080", "sm_86"),
    p("GeForce RTX 3070", "sm_86"),
    p("GeForce RTX 3060", "sm_86"),
    p("RTX A6000", "sm_86"),
    p("GeForce RTX 4090", "sm_89"),
    p("GeForce RTX 4080", "sm_89"),
    p("GeForce RTX 4070", "sm_89"),
    p("GeForce RTX 4060", "sm_89"),
    p("RTX 6000 Ada", "sm_89"),
    p("GeForce RTX 5090", "sm_120"),
    p("GeForce RTX 5080", "sm_120"),
    p("GeForce RTX 5070", "sm_120"),
    p("RTX PRO 6000 Blackwell", "sm_120"),
    // NVIDIA Jetson
    p("Jetson AGX Xavier", "sm_72"),
    p("Jetson AGX Orin", "sm_87"),
];

/// The CUDA architectures NVIDIA has shipped (the `NN` of `sm_NN`), from
/// NVIDIA's compute capability list.
pub const CUDA_ARCHS: &[u32] =
    &[20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121];

/// Words of product names that people leave out or add (`AMD`, `NVIDIA
/// GeForce`): ignored when comparing.
const NOISE: &[&str] = &["amd", "nvidia", "instinct", "radeon", "geforce", "tesla", "pro"];

/// `name` lowercased, without spaces, dashes, underscores and the words of
/// [`NOISE`]: `AMD Instinct MI300X` and `mi-300x` both give `mi300x`.
fn squeeze(name: &str) -> String {
    name.split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|w| !w.is_empty() && !NOISE.contains(&w.to_ascii_lowercase().as_str()))
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The products whose names match `name` (case, spaces and maker words
/// aside).
pub fn products(name: &str) -> impl Iterator<Item = &'static Product> + '_ {
    let key = squeeze(name);
    PRODUCTS.iter().filter(move |p| !key.is_empty() && squeeze(p.name) == key)
}

/// The CUDA architecture number of `sm_NN`, `sm_NNa`/`f`, `compute_NN` or
/// `N.M`, whether or not it exists.
fn cuda_number(name: &str) -> Option<u32> {
    let digits = if let Some(rest) = name.strip_prefix("sm_").or_else(|| name.strip_prefix("compute_")) {
        rest.trim_end_matches(['a', 'f'])
    } else if let Some((major, minor)) = name.split_once('.') {
        return (major.len() <= 2 && minor.len() == 1)
            .then(|| Some(major.parse::<u32>().ok()? * 10 + minor.parse::<u32>().ok()?))
            .flatten();
    } else {
        return None;
    };
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `name` (a processor, a target ID such as `gfx90a:xnack+`, or a
/// CUDA architecture `sm_89`, `compute_90`, `8.9`) names a GPU a release of
/// the tools knows.
pub fn is_known(name: &str) -> bool {
    let processor = name.split(':').next().unwrap_or(name);
    if let Some(n) = cuda_number(processor) {
        return CUDA_ARCHS.contains(&n);
    }
    known_amdgcn(processor)
}

fn known_amdgcn(processor: &str) -> bool {
    amdgpu::Table::Current.amdgcn_processor(processor).is_some()
}

/// Every processor name and CUDA architecture, for near-miss suggestions.
fn all_names() -> Vec<String> {
    let mut names: Vec<String> =
        amdgpu::Table::Current.amdgcn_processors().iter().map(|p| p.name.to_string()).collect();
    names.extend(CUDA_ARCHS.iter().map(|n| format!("sm_{n}")));
    names
}

/// Levenshtein distance, for names of a few bytes.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// What to say about a GPU name none of the tables knows; `None` when the
/// name is known. The text reads after `unknown GPU 'NAME'`: `; did you
/// mean gfx90a?`, `; Instinct MI300X is gfx942: use --gpu gfx942`.
pub fn advice(name: &str) -> Option<String> {
    if is_known(name) {
        return None;
    }
    let (processor, features) = match name.split_once(':') {
        Some((p, f)) => (p, Some(f)),
        None => (name, None),
    };
    let with_features = |p: &str| match features {
        Some(f) => format!("{p}:{}", f.to_ascii_lowercase()),
        None => p.to_string(),
    };
    // A case slip or a missing underscore.
    let lower = processor.to_ascii_lowercase();
    let respelled = match lower.strip_prefix("sm") {
        Some(rest) if !rest.starts_with('_') && !rest.is_empty() => format!("sm_{rest}"),
        _ => lower.clone(),
    };
    if respelled != processor && is_known(&respelled) {
        return Some(format!("did you mean {}?", with_features(&respelled)));
    }
    let found: Vec<&Product> = products(name).collect();
    if let Some(first) = found.first() {
        return Some(format!("{} is {}: use {}", first.name, first.target, first.target));
    }
    // An architecture number no GPU has: a near number would be a guess.
    if cuda_number(&respelled).is_some() {
        return Some("no NVIDIA GPU has this architecture (docs/reference/gpu-names.md lists them)".to_string());
    }
    // A near miss: the closest names, at most two edits away.
    let names = all_names();
    let best = names.iter().map(|n| (distance(&respelled, n), n)).filter(|(d, _)| *d <= 2).min_by_key(|(d, _)| *d);
    if let Some((_, n)) = best {
        return Some(format!("did you mean {}?", with_features(n)));
    }
    Some("not a processor name of any LLVM release these tools know (docs/reference/gpu-names.md)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_need_no_advice() {
        for name in [
            "gfx90a",
            "gfx90a:xnack+",
            "gfx942:sramecc+:xnack-",
            "gfx1100",
            "sm_89",
            "sm_90a",
            "compute_90",
            "8.9",
            "gfx9-generic",
        ] {
            assert_eq!(advice(name), None, "{name}");
        }
    }

    #[test]
    fn case_slips_and_missing_underscores() {
        assert_eq!(advice("GFX90A").as_deref(), Some("did you mean gfx90a?"));
        assert_eq!(advice("GFX90A:XNACK+").as_deref(), Some("did you mean gfx90a:xnack+?"));
        assert_eq!(advice("SM_89").as_deref(), Some("did you mean sm_89?"));
        assert_eq!(advice("sm89").as_deref(), Some("did you mean sm_89?"));
    }

    #[test]
    fn product_names() {
        assert_eq!(advice("MI300X").as_deref(), Some("Instinct MI300X is gfx942: use gfx942"));
        assert_eq!(advice("AMD Instinct MI250X").as_deref(), Some("Instinct MI250X is gfx90a: use gfx90a"));
        assert_eq!(advice("RTX 4090").as_deref(), Some("GeForce RTX 4090 is sm_89: use sm_89"));
        assert_eq!(advice("rtx4090").as_deref(), Some("GeForce RTX 4090 is sm_89: use sm_89"));
        assert_eq!(advice("H100").as_deref(), Some("H100 is sm_90: use sm_90"));
    }

    #[test]
    fn near_misses_and_nonsense() {
        assert_eq!(advice("gfx9000").as_deref(), Some("did you mean gfx900?"));
        assert!(advice("sm_999").unwrap().starts_with("no NVIDIA GPU"), "{:?}", advice("sm_999"));
        assert!(advice("banana").unwrap().starts_with("not a processor name"));
        assert!(advice("").is_some());
    }

    #[test]
    fn every_product_names_a_known_target() {
        for p in PRODUCTS {
            assert!(is_known(p.target), "{} -> {}", p.name, p.target);
            assert_eq!(products(p.name).next().map(|q| q.target), Some(p.target), "{}", p.name);
        }
    }
}
