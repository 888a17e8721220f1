//! The registration module `clang-offload-wrapper` of LLVM 14 builds for a
//! host triple and a list of device images, plus the image-info extension
//! (one `--offload-arch` target ID per image).
//!
//! ```text
//! %__tgt_offload_entry = type { i8*, i8*, i64, i32, i32 }
//! %__tgt_device_image  = type { i8*, i8*, %__tgt_offload_entry*, %__tgt_offload_entry* }
//! %__tgt_bin_desc      = type { i32, %__tgt_device_image*, %__tgt_offload_entry*, %__tgt_offload_entry* }
//! %__tgt_image_info    = type { i32, i32, i32, i8*, i8* }          ; extension only
//!
//! @__start_omp_offloading_entries / @__stop_...  external hidden constant declarations
//! @__dummy.omp_offloading.entry      hidden [0 x entry] in section "omp_offloading_entries"
//! @.omp_offloading.device_image[.N]  internal unnamed_addr constant: the image bytes
//! @.omp_offloading.device_images     internal unnamed_addr constant [n x device_image]
//! @.omp_offloading.descriptor        internal constant bin_desc { n, images, start, stop }
//! @__offload_arch[.N]                internal unnamed_addr constant "<target-id>\0",
//!                                    section ".offload_arch_list"             ; extension
//! @.offload_image_info[.N]           internal unnamed_addr constant
//!                                    { 1, N, n, @__offload_arch[.N], null }   ; extension
//! @llvm.global_ctors / _dtors        priority 1: descriptor_reg / descriptor_unreg
//! ```
//!
//! `.omp_offloading.descriptor_reg` (section `.text.startup`) calls
//! `__tgt_register_image_info` for each image-info record, in order, then
//! `__tgt_register_lib`; `.omp_offloading.descriptor_unreg` calls
//! `__tgt_unregister_lib`.
//!
//! LLVM sizes `size_t` from the module's datalayout, and the wrapper never
//! sets one, so it is `i64` for every triple. The second and later images
//! are named by LLVM's name uniquing: `.N`, but without the dot on NVPTX
//! triples; image-info names follow the same rule, numbered by image.

use super::bitcode::{self, BitcodeError};
use super::ir::{Block, ConstId, Function, GlobalVar, Inst, Linkage, Module, UnnamedAddr, Visibility};
use super::triple;
use crate::plan::Plan;
use std::borrow::Cow;

/// Why the wrapper module cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WrapError {
    /// LLVM 14's own message for a triple whose architecture it does not know.
    #[error("'{triple}': unsupported target triple")]
    UnsupportedTriple {
        /// The triple given.
        triple: String,
    },
    /// Not one `--offload-arch` per image.
    #[error("{archs} --offload-arch values for {images} images: give one per image, in the same order")]
    ArchCountMismatch {
        /// `--offload-arch` values given.
        archs: usize,
        /// Images given.
        images: usize,
    },
    /// An `--offload-arch` value with a NUL byte (the value).
    #[error("--offload-arch value '{value}' contains a NUL byte")]
    ArchWithNul {
        /// The value given.
        value: String,
    },
    /// The module cannot be written as bitcode.
    #[error(transparent)]
    Bitcode(#[from] BitcodeError),
    /// The module could not be built (a bug in the builder).
    #[error("{0}")]
    Ir(#[from] super::ir::IrError),
}

/// The `source_filename` and module ID LLVM 14's wrapper uses.
pub const SOURCE_FILENAME: &str = "offload.wrapper.object";

/// What to wrap.
#[derive(Clone, Debug, Default)]
pub struct WrapperInput<'a> {
    /// The target triple of the module (clang passes the host triple).
    pub triple: &'a str,
    /// Device images, in registration order.
    pub images: Vec<&'a [u8]>,
    /// Either empty, or one target ID per image (the image-info extension).
    pub offload_archs: Vec<&'a str>,
}

/// Checks what [`build`] checks before looking at image contents: the
/// triple, and one target ID per image when there are any.
pub fn check(triple: &str, image_count: usize, offload_archs: &[&str]) -> Result<(), WrapError> {
    if !triple::is_known(triple) {
        return Err(WrapError::UnsupportedTriple { triple: triple.to_string() });
    }
    if !offload_archs.is_empty() && offload_archs.len() != image_count {
        return Err(WrapError::ArchCountMismatch { archs: offload_archs.len(), images: image_count });
    }
    if let Some(a) = offload_archs.iter().find(|a| a.contains('\0')) {
        return Err(WrapError::ArchWithNul { value: a.to_string() });
    }
    Ok(())
}

/// Builds the registration module.
pub fn build<'a>(input: &WrapperInput<'a>) -> Result<Module<'a>, WrapError> {
    let t = input.triple;
    let archs = &input.offload_archs;
    check(t, input.images.len(), archs)?;
    let suffix = |base: &str, i: usize| match i {
        0 => base.to_string(),
        _ if triple::is_nvptx(t) => format!("{base}{i}"),
        _ => format!("{base}.{i}"),
    };

    let mut m = Module::new(SOURCE_FILENAME, t);
    let i8 = m.int_type(8);
    let i8p = m.ptr_type(i8);
    let i32 = m.int_type(32);
    let size_t = m.int_type(64);
    let entry = m.named_struct_type("__tgt_offload_entry", Some(&[i8p, i8p, size_t, i32, i32]), false);
    let entry_p = m.ptr_type(entry);
    let image = m.named_struct_type("__tgt_device_image", Some(&[i8p, i8p, entry_p, entry_p]), false);
    let image_p = m.ptr_type(image);
    let desc = m.named_struct_type("__tgt_bin_desc", Some(&[i32, image_p, entry_p, entry_p]), false);
    let desc_p = m.ptr_type(desc);

    let table_end = |m: &mut Module<'a>, name: &str| {
        let g =
            m.add_global(GlobalVar { constant: true, visibility: Visibility::Hidden, ..GlobalVar::new(name, entry) });
        m.global_addr(g)
    };
    let start = table_end(&mut m, "__start_omp_offloading_entries")?;
    let stop = table_end(&mut m, "__stop_omp_offloading_entries")?;
    let no_entries = m.array_type(entry, 0);
    let dummy_init = m.null(no_entries);
    m.add_global(GlobalVar {
        constant: true,
        init: Some(dummy_init),
        visibility: Visibility::Hidden,
        section: Some("omp_offloading_entries".into()),
        ..GlobalVar::new("__dummy.omp_offloading.entry", no_entries)
    });

    let zero = m.int(size_t, 0);
    let one = m.int(size_t, 1);
    let mut image_inits = Vec::with_capacity(input.images.len());
    for (i, bytes) in input.images.iter().enumerate() {
        let data = m.bytes(Cow::Borrowed(bytes));
        let (g, ty) = internal_constant(&mut m, &suffix(".omp_offloading.device_image", i), data, true)?;
        let addr = m.global_addr(g)?;
        let begin = m.gep(true, ty, addr, &[zero, zero])?;
        // LLVM folds `&image[len]` to `&image[1][0]`; an empty array keeps (0, 0).
        let end_index = if bytes.is_empty() { zero } else { one };
        let end = m.gep(true, ty, addr, &[end_index, zero])?;
        image_inits.push(m.aggregate(image, &[begin, end, start, stop]));
    }
    let images_ty = m.array_type(image, input.images.len() as u64);
    let images_init = m.aggregate(images_ty, &image_inits);
    let (images, _) = internal_constant(&mut m, ".omp_offloading.device_images", images_init, true)?;
    let images_addr = m.global_addr(images)?;
    let images_begin = m.gep(true, images_ty, images_addr, &[zero, zero])?;
    let count = m.int(i32, input.images.len() as u64);
    let desc_init = m.aggregate(desc, &[count, images_begin, start, stop]);
    let (descriptor, _) = internal_constant(&mut m, ".omp_offloading.descriptor", desc_init, false)?;
    let desc_addr = m.global_addr(descriptor)?;

    let mut infos = Vec::new();
    let mut info_p = None;
    if !archs.is_empty() {
        let info = m.named_struct_type("__tgt_image_info", Some(&[i32, i32, i32, i8p, i8p]), false);
        info_p = Some(m.ptr_type(info));
        let version = m.int(i32, 1);
        let number = m.int(i32, archs.len() as u64);
        let no_opts = m.null(i8p);
        for (i, arch) in archs.iter().enumerate() {
            let mut s = arch.as_bytes().to_vec();
            s.push(0);
            let data = m.bytes(Cow::Owned(s));
            let (g, ty) = internal_constant(&mut m, &suffix("__offload_arch", i), data, true)?;
            if let Some(gv) = m.global_mut(g) {
                gv.section = Some(".offload_arch_list".into());
            }
            let addr = m.global_addr(g)?;
            let name_ptr = m.gep(true, ty, addr, &[zero, zero])?;
            let index = m.int(i32, i as u64);
            let init = m.aggregate(info, &[version, index, number, name_ptr, no_opts]);
            let (g, _) = internal_constant(&mut m, &suffix(".offload_image_info", i), init, true)?;
            infos.push(m.global_addr(g)?);
        }
    }

    let void = m.void_type();
    let ctor_ty = m.function_type(void, &[], false);
    let reg_lib_ty = m.function_type(void, &[desc_p], false);
    let ctor_fields = [i32, m.ptr_type(ctor_ty), i8p];
    let ctor_entry = m.struct_type(&ctor_fields, false);
    let ctor_array = m.array_type(ctor_entry, 1);
    let priority = m.int(i32, 1);
    let no_data = m.null(i8p);

    let reg = m.add_function(startup_function(".omp_offloading.descriptor_reg", ctor_ty));
    let reg_lib = m.add_function(Function::new("__tgt_register_lib", reg_lib_ty));
    let mut body = Vec::new();
    if let Some(info_p) = info_p {
        let reg_info_ty = m.function_type(void, &[info_p], false);
        let reg_info = m.add_function(Function::new("__tgt_register_image_info", reg_info_ty));
        let callee = m.function_addr(reg_info)?;
        for info in &infos {
            body.push(Inst::Call { fnty: reg_info_ty, callee, args: vec![*info] });
        }
    }
    let callee = m.function_addr(reg_lib)?;
    body.push(Inst::Call { fnty: reg_lib_ty, callee, args: vec![desc_addr] });
    body.push(Inst::Ret(None));
    set_body(&mut m, reg, body);

    let unreg = m.add_function(startup_function(".omp_offloading.descriptor_unreg", ctor_ty));
    let unreg_lib = m.add_function(Function::new("__tgt_unregister_lib", reg_lib_ty));
    let callee = m.function_addr(unreg_lib)?;
    set_body(&mut m, unreg, vec![Inst::Call { fnty: reg_lib_ty, callee, args: vec![desc_addr] }, Inst::Ret(None)]);

    for (name, f) in [("llvm.global_ctors", reg), ("llvm.global_dtors", unreg)] {
        let f = m.function_addr(f)?;
        let item = m.aggregate(ctor_entry, &[priority, f, no_data]);
        let init = m.aggregate(ctor_array, &[item]);
        m.add_global(GlobalVar { init: Some(init), linkage: Linkage::Appending, ..GlobalVar::new(name, ctor_array) });
    }
    Ok(m)
}

/// Writes the module as bitcode; the plan borrows the images.
pub fn write_bitcode<'m, 'a: 'm>(m: &'m Module<'a>) -> Result<Plan<'m>, WrapError> {
    Ok(bitcode::write(m)?)
}

/// An internal constant global holding `init`; returns it and its type.
fn internal_constant(
    m: &mut Module<'_>,
    name: &str,
    init: ConstId,
    unnamed: bool,
) -> Result<(super::ir::GlobalId, super::ir::TypeId), WrapError> {
    let ty = m.const_type(init).ok_or(super::ir::IrError::BadId)?;
    let g = m.add_global(GlobalVar {
        constant: true,
        init: Some(init),
        linkage: Linkage::Internal,
        unnamed_addr: if unnamed { UnnamedAddr::Global } else { UnnamedAddr::None },
        ..GlobalVar::new(name, ty)
    });
    Ok((g, ty))
}

fn startup_function(name: &str, ty: super::ir::TypeId) -> Function {
    Function {
        linkage: Linkage::Internal,
        section: Some(".text.startup".into()),
        body: Some(Block::default()),
        ..Function::new(name, ty)
    }
}

fn set_body(m: &mut Module<'_>, f: super::ir::FuncId, insts: Vec<Inst>) {
    if let Some(f) = m.function_mut(f) {
        f.body = Some(Block { name: "entry".into(), insts });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::bitcode::tests::{Item, decode};
    use crate::wrapper::text::to_text;
    use proptest::prelude::*;

    fn build_for<'a>(triple: &'a str, images: &[&'a [u8]], archs: &[&'a str]) -> Result<Module<'a>, WrapError> {
        build(&WrapperInput { triple, images: images.to_vec(), offload_archs: archs.to_vec() })
    }

    #[test]
    fn argument_checks() {
        assert_eq!(check("bogus-triple", 1, &[]), Err(WrapError::UnsupportedTriple { triple: "bogus-triple".into() }));
        assert_eq!(check("x86_64", 2, &["a"]), Err(WrapError::ArchCountMismatch { archs: 1, images: 2 }));
        assert_eq!(check("x86_64", 0, &["a"]), Err(WrapError::ArchCountMismatch { archs: 1, images: 0 }));
        assert!(matches!(check("x86_64", 1, &["a\0b"]), Err(WrapError::ArchWithNul { .. })));
        assert_eq!(check("x86_64", 0, &[]), Ok(()));
        assert_eq!(
            WrapError::UnsupportedTriple { triple: "t".into() }.to_string(),
            "'t': unsupported target triple",
            "LLVM 14's wording"
        );
    }

    #[test]
    fn global_names_follow_llvm_uniquing() {
        let names = |t: &str| {
            let m = build_for(t, &[b"a", b"b", b"c"], &["x", "y", "z"]).unwrap();
            m.globals().iter().map(|g| g.name.clone()).collect::<Vec<_>>()
        };
        let x86 = names("x86_64-pc-linux-gnu");
        assert_eq!(
            x86,
            [
                "__start_omp_offloading_entries",
                "__stop_omp_offloading_entries",
                "__dummy.omp_offloading.entry",
                ".omp_offloading.device_image",
                ".omp_offloading.device_image.1",
                ".omp_offloading.device_image.2",
                ".omp_offloading.device_images",
                ".omp_offloading.descriptor",
                "__offload_arch",
                ".offload_image_info",
                "__offload_arch.1",
                ".offload_image_info.1",
                "__offload_arch.2",
                ".offload_image_info.2",
                "llvm.global_ctors",
                "llvm.global_dtors",
            ]
        );
        let nv = names("nvptx64-nvidia-cuda");
        assert_eq!(nv[4], ".omp_offloading.device_image1");
        assert_eq!(nv[12], "__offload_arch2");
    }

    #[test]
    fn functions_and_constructor_order() {
        let m = build_for("x86_64", &[b"a"], &["gfx906"]).unwrap();
        let f: Vec<_> = m.functions().iter().map(|f| (f.name.as_str(), f.body.is_some())).collect();
        assert_eq!(
            f,
            [
                (".omp_offloading.descriptor_reg", true),
                ("__tgt_register_lib", false),
                ("__tgt_register_image_info", false),
                (".omp_offloading.descriptor_unreg", true),
                ("__tgt_unregister_lib", false),
            ]
        );
        let reg = m.functions()[0].body.as_ref().unwrap();
        assert_eq!(reg.name, "entry");
        assert_eq!(reg.insts.len(), 3);
        let plain = build_for("x86_64", &[b"a"], &[]).unwrap();
        assert!(!plain.functions().iter().any(|f| f.name == "__tgt_register_image_info"));
        assert!(
            !plain
                .types()
                .iter()
                .any(|t| matches!(t, crate::wrapper::ir::Type::Named { name, .. } if name == "__tgt_image_info"))
        );
    }

    fn image_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..700),
            prop::collection::vec(prop_oneof![Just(0u8), Just(b'A')], 0..8),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn images_round_trip_through_the_bitcode(
            images in prop::collection::vec(image_strategy(), 0..6),
            triple in prop::sample::select(vec!["x86_64-pc-linux-gnu", "i386", "nvptx64-nvidia-cuda", "amdgcn-amd-amdhsa", "aarch64"]),
            with_archs in any::<bool>(),
        ) {
            let refs: Vec<&[u8]> = images.iter().map(Vec::as_slice).collect();
            let archs: Vec<String> = (0..images.len()).map(|i| format!("gfx9{i:02}")).collect();
            let arch_refs: Vec<&str> = if with_archs { archs.iter().map(String::as_str).collect() } else { vec![] };
            let m = build_for(triple, &refs, &arch_refs).unwrap();
            let bytes = crate::wrapper::bitcode::to_vec(&m).unwrap();
            let top = decode(&bytes);
            let module = &top[1];
            let consts = module.block(11);
            // Every non-zero image (and target ID) comes back, in order.
            let mut strings = Vec::new();
            for item in &consts.items {
                match item {
                    Item::Rec(8, _, Some(b)) => strings.push(b.clone()),
                    Item::Rec(9, _, Some(b)) => strings.push([b.as_slice(), &[0]].concat()),
                    _ => {}
                }
            }
            let mut want: Vec<Vec<u8>> = images.iter().filter(|i| i.iter().any(|&b| b != 0)).cloned().collect();
            if with_archs {
                want.extend(archs.iter().map(|a| [a.as_bytes(), &[0]].concat()));
            }
            prop_assert_eq!(strings, want);
            let n_globals = 3 + images.len() + 2 + if with_archs { 2 * images.len() } else { 0 } + 2;
            prop_assert_eq!(module.records(7).len(), n_globals);
            let text = to_text(&m, "x");
            prop_assert_eq!(text.matches("@.omp_offloading.device_image").count() >= images.len(), true);
        }
    }
}
