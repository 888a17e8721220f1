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
pub enum WrapError {
    /// LLVM 14's own message for a triple whose architecture it does not know.
    #[error("'{0}': unsupported target triple")]
    UnsupportedTriple(String),
    #[error("{archs} --offload-arch values for {images} images: give one per image, in the same order")]
    ArchCountMismatch { archs: usize, images: usize },
    #[error("--offload-arch value '{0}' contains a NUL byte")]
    ArchWithNul(String),
    #[error(transparent)]
    Bitcode(#[from] BitcodeError),
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
        return Err(WrapError::UnsupportedTriple(triple.to_string()));
    }
    if !offload_archs.is_empty() && offload_archs.len() != image_count {
        return Err(WrapError::ArchCountMismatch { archs: offload_archs.len(), images: image_count });
    }
    if let Some(a) = offload_archs.iter().find(|a| a.contains('\0')) {
        return Err(WrapError::ArchWithNul(a.to_string()));
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
