//! The registration modules LLVM 22's `llvm-offload-wrapper` builds
//! (`--kind=openmp|cuda|hip`), with opaque pointers. The shapes, taken from
//! `llvm-dis` of LLVM 22's own outputs, are described in
//! `docs/tools/llvm-offload-wrapper.md`; in short:
//!
//! ```text
//! %struct.__tgt_offload_entry = type { i64, i16, i16, i32, ptr, ptr, i64, i64, ptr }
//! @__start_/__stop_llvm_offload_entries   the entry table's ends (per object format)
//! @__dummy.llvm_offload_entries           ELF/other: keeps the section in the link
//!
//! openmp: @.omp_offloading.device_image[.N]   section ".llvm.offloading", align 8
//!         @.omp_offloading.device_images, @.omp_offloading.descriptor
//!         ctor (priority 101) .omp_offloading.descriptor_reg:
//!             __tgt_register_lib(desc); atexit(.omp_offloading.descriptor_unreg)
//! cuda/hip: @.fatbin_image, @.fatbin_wrapper { magic, 1, image, null },
//!         @.<cuda|hip>.binary_handle; ctor .<k>.fatbin_reg registers the fat
//!         binary, then every entry of the table (.<k>.globals_reg), and
//!         sets atexit(.<k>.fatbin_unreg)
//! ```

use super::ir::{
    BinOp, Block, BlockId, CastOp, ConstId, FuncId, Function, GlobalVar, Inst, IntPredicate, Linkage, Module, TypeId,
    UnnamedAddr, Value, Visibility,
};
use super::triple;
use std::borrow::Cow;

/// The `source_filename` LLVM 22's wrapper gives its module.
pub const SOURCE_FILENAME: &str = "offload.wrapper.module";

/// The default `--triple` of LLVM 22's tool as Debian and Ubuntu build it
/// (the host's default target triple on x86-64 Linux).
pub const DEFAULT_TRIPLE: &str = "x86_64-pc-linux-gnu";

/// What the module registers the images with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// libomptarget (`__tgt_register_lib`); any number of images.
    OpenMp,
    /// The CUDA runtime (`__cudaRegisterFatBinary`); one fat binary.
    Cuda,
    /// The HIP runtime (`__hipRegisterFatBinary`); one fat binary or
    /// offload bundle.
    Hip,
}

impl Kind {
    /// The `--kind` value.
    pub fn name(self) -> &'static str {
        match self {
            Kind::OpenMp => "openmp",
            Kind::Cuda => "cuda",
            Kind::Hip => "hip",
        }
    }

    /// The kind for a `--kind` value.
    pub fn from_name(s: &str) -> Option<Kind> {
        match s {
            "openmp" => Some(Kind::OpenMp),
            "cuda" => Some(Kind::Cuda),
            "hip" => Some(Kind::Hip),
            _ => None,
        }
    }
}

/// Why the LLVM 22 module cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WrapError {
    /// CUDA or HIP with other than one image (LLVM 22's message).
    #[error("CUDA / HIP offloading uses a single fatbinary or offload bundle")]
    SingleImage,
    /// An OpenMP image that starts with the OffloadBinary magic but is too
    /// short to hold the fields LLVM 22 reads from it (LLVM would read past
    /// the buffer).
    #[error("image {index} starts like an OffloadBinary but ends before its entry's image offset and size")]
    TruncatedOffloadBinary {
        /// The image's position among the inputs, from 0.
        index: usize,
    },
    /// The module could not be built (a bug in the builder).
    #[error("{0}")]
    Ir(#[from] super::ir::IrError),
}

/// Where the device image of an OpenMP input starts and ends within it, as
/// LLVM 22's wrapper sets `__tgt_device_image`'s two pointers: the whole
/// input, or, for an input that starts with the OffloadBinary magic, the
/// image of its first entry (the header's entry offset at byte 16, the
/// entry's image offset and size at bytes 24 and 32 of the entry), so that
/// libomptarget is handed the image while the section keeps the whole
/// binary for the tools (docs/tools/llvm-offload-wrapper.md). The offsets
/// are taken as written, as LLVM takes them; `None` when the input is too
/// short to hold them, where LLVM would read past its buffer.
fn openmp_image_range(bytes: &[u8]) -> Option<(u64, u64)> {
    if !bytes.starts_with(&crate::offload_binary::MAGIC) {
        return Some((0, bytes.len() as u64));
    }
    let u64_at = |at: u64| crate::bytes::u64_le(bytes, at);
    let entry = u64_at(16)?;
    let offset = u64_at(entry.checked_add(24)?)?;
    let size = u64_at(entry.checked_add(32)?)?;
    Some((offset, offset.wrapping_add(size)))
}

/// The object file format LLVM picks by default for a triple (the part of
/// it that changes the module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Coff,
    MachO,
    Other,
}

fn object_format(t: &str) -> Format {
    let parts: Vec<&str> = t.split('-').collect();
    let env = parts.get(3).copied().unwrap_or("");
    if env.ends_with("elf") {
        return Format::Other;
    }
    if env.ends_with("coff") {
        return Format::Coff;
    }
    if env.ends_with("macho") {
        return Format::MachO;
    }
    let os = parts.get(2).copied().unwrap_or("");
    let darwin = ["darwin", "macos", "ios", "tvos", "watchos", "xros", "visionos", "driverkit", "bridgeos"];
    if darwin.iter().any(|d| os.starts_with(d)) {
        Format::MachO
    } else if os.starts_with("win32") || os.starts_with("windows") || os.starts_with("uefi") {
        Format::Coff
    } else {
        Format::Other
    }
}

/// Builds LLVM 22's registration module of `kind` for `triple`. CUDA and
/// HIP take exactly one image.
pub fn build<'a>(kind: Kind, triple: &str, images: &[&'a [u8]]) -> Result<Module<'a>, WrapError> {
    if kind != Kind::OpenMp && images.len() != 1 {
        return Err(WrapError::SingleImage);
    }
    let mut b = Builder::new(triple);
    let (start, stop) = b.entry_table()?;
    match kind {
        Kind::OpenMp => b.openmp(images, start, stop)?,
        Kind::Cuda | Kind::Hip => {
            let image = images.first().copied().unwrap_or_default();
            b.fatbin(kind == Kind::Hip, image, start, stop)?
        }
    }
    Ok(b.m)
}

struct Builder<'a> {
    m: Module<'a>,
    format: Format,
    nvptx: bool,
    ptr: TypeId,
    i16: TypeId,
    i32: TypeId,
    i64: TypeId,
    void: TypeId,
    entry: TypeId,
}

fn internal_const(name: &str, ty: TypeId, init: ConstId) -> GlobalVar {
    GlobalVar { constant: true, init: Some(init), linkage: Linkage::Internal, ..GlobalVar::new(name, ty) }
}

fn startup(name: &str, ty: TypeId, blocks: Vec<Block>) -> Function {
    let mut blocks = blocks.into_iter();
    Function {
        linkage: Linkage::Internal,
        section: Some(".text.startup".into()),
        body: blocks.next(),
        more_blocks: blocks.collect(),
        ..Function::new(name, ty)
    }
}

fn block(name: &str, insts: Vec<Inst>) -> Block {
    Block { name: name.into(), insts }
}

fn named(name: &str, i: Inst) -> Inst {
    Inst::Named(name.into(), Box::new(i))
}

impl<'a> Builder<'a> {
    fn new(triple: &str) -> Self {
        let mut m = Module::new(SOURCE_FILENAME, triple);
        m.opaque_pointers = true;
        let i8 = m.int_type(8);
        let ptr = m.ptr_type(i8);
        let i16 = m.int_type(16);
        let i32 = m.int_type(32);
        let i64 = m.int_type(64);
        let void = m.void_type();
        let entry = m.named_struct_type(
            "struct.__tgt_offload_entry",
            Some(&[i64, i16, i16, i32, ptr, ptr, i64, i64, ptr]),
            false,
        );
        Builder { m, format: object_format(triple), nvptx: triple::is_nvptx(triple), ptr, i16, i32, i64, void, entry }
    }

    fn addr(&mut self, f: FuncId) -> Result<ConstId, WrapError> {
        Ok(self.m.function_addr(f)?)
    }

    /// `__start_`/`__stop_llvm_offload_entries` (and the dummy entry that
    /// keeps the section), as their addresses.
    fn entry_table(&mut self) -> Result<(ConstId, ConstId), WrapError> {
        let table = self.m.array_type(self.entry, 0);
        let mut ends = Vec::new();
        for (name, suffix) in [("__start_llvm_offload_entries", "$OA"), ("__stop_llvm_offload_entries", "$OZ")] {
            let g = GlobalVar { constant: true, visibility: Visibility::Hidden, ..GlobalVar::new(name, table) };
            let g = match self.format {
                Format::Coff => {
                    let init = self.m.null(table);
                    GlobalVar {
                        init: Some(init),
                        linkage: Linkage::WeakOdr,
                        section: Some(format!("llvm_offload_entries{suffix}")),
                        ..g
                    }
                }
                Format::MachO => GlobalVar { section: Some(format!("llvm_offload_entries{suffix}")), ..g },
                Format::Other => g,
            };
            let g = self.m.add_global(g);
            ends.push(self.m.global_addr(g)?);
        }
        if self.format == Format::Other {
            let init = self.m.null(table);
            let dummy = self.m.add_global(GlobalVar {
                section: Some("llvm_offload_entries".into()),
                align: Some(8),
                ..internal_const("__dummy.llvm_offload_entries", table, init)
            });
            let used_ty = self.m.array_type(self.ptr, 1);
            let d = self.m.global_addr(dummy)?;
            let init = self.m.aggregate(used_ty, &[d]);
            self.m.add_global(GlobalVar {
                init: Some(init),
                linkage: Linkage::Appending,
                section: Some("llvm.metadata".into()),
                ..GlobalVar::new("llvm.compiler.used", used_ty)
            });
        }
        Ok((ends[0], ends[1]))
    }

    fn ctor(&mut self, reg: FuncId) -> Result<(), WrapError> {
        let ctor = self.m.struct_type(&[self.i32, self.ptr, self.ptr], false);
        let ctors = self.m.array_type(ctor, 1);
        let priority = self.m.int(self.i32, 101);
        let f = self.addr(reg)?;
        let data = self.m.null(self.ptr);
        let item = self.m.aggregate(ctor, &[priority, f, data]);
        let init = self.m.aggregate(ctors, &[item]);
        self.m.add_global(GlobalVar {
            init: Some(init),
            linkage: Linkage::Appending,
            ..GlobalVar::new("llvm.global_ctors", ctors)
        });
        Ok(())
    }

    fn declare(&mut self, name: &str, ret: TypeId, params: &[TypeId]) -> Result<(FuncId, TypeId, ConstId), WrapError> {
        let ty = self.m.function_type(ret, params, false);
        let f = self.m.add_function(Function::new(name, ty));
        Ok((f, ty, self.addr(f)?))
    }

    fn openmp(&mut self, images: &[&'a [u8]], start: ConstId, stop: ConstId) -> Result<(), WrapError> {
        let p = self.ptr;
        let image_ty = self.m.named_struct_type("__tgt_device_image", Some(&[p, p, p, p]), false);
        let desc_ty = self.m.named_struct_type("__tgt_bin_desc", Some(&[self.i32, p, p, p]), false);
        let zero = self.m.int(self.i64, 0);
        let mut inits = Vec::with_capacity(images.len());
        for (i, bytes) in images.iter().enumerate() {
            let name = match i {
                0 => ".omp_offloading.device_image".to_string(),
                _ if self.nvptx => format!(".omp_offloading.device_image{i}"),
                _ => format!(".omp_offloading.device_image.{i}"),
            };
            let data = self.m.bytes(Cow::Borrowed(bytes));
            let ty = self.m.const_type(data).ok_or(super::ir::IrError::BadId)?;
            let g = self.m.add_global(GlobalVar {
                unnamed_addr: UnnamedAddr::Global,
                section: Some(".llvm.offloading".into()),
                align: Some(8),
                ..internal_const(&name, ty, data)
            });
            let base = self.m.global_addr(g)?;
            // `&image[n]`: LLVM 22 keeps it as a plain (0, n), never
            // `inbounds`, and folds n = 0 to the image itself.
            let (from, to) = openmp_image_range(bytes).ok_or(WrapError::TruncatedOffloadBinary { index: i })?;
            let mut at = |n: u64| -> Result<ConstId, WrapError> {
                if n == 0 {
                    return Ok(base);
                }
                let index = self.m.int(self.i64, n);
                Ok(self.m.gep_as_given(false, ty, base, &[zero, index])?)
            };
            let (begin, end) = (at(from)?, at(to)?);
            inits.push(self.m.aggregate(image_ty, &[begin, end, start, stop]));
        }
        let images_ty = self.m.array_type(image_ty, images.len() as u64);
        let init = self.m.aggregate(images_ty, &inits);
        let table = self.m.add_global(GlobalVar {
            unnamed_addr: UnnamedAddr::Global,
            ..internal_const(".omp_offloading.device_images", images_ty, init)
        });
        let table = self.m.global_addr(table)?;
        let count = self.m.int(self.i32, images.len() as u64);
        let init = self.m.aggregate(desc_ty, &[count, table, start, stop]);
        let desc = self.m.add_global(internal_const(".omp_offloading.descriptor", desc_ty, init));
        let desc = self.m.global_addr(desc)?;

        let fn_ty = self.m.function_type(self.void, &[], false);
        let reg = self.m.add_function(startup(".omp_offloading.descriptor_reg", fn_ty, Vec::new()));
        let (_, lib_ty, register) = self.declare("__tgt_register_lib", self.void, &[p])?;
        let (_, atexit_ty, atexit) = self.declare("atexit", self.i32, &[p])?;
        let unreg = self.m.add_function(startup(".omp_offloading.descriptor_unreg", fn_ty, Vec::new()));
        let (_, _, unregister) = self.declare("__tgt_unregister_lib", self.void, &[p])?;
        let unreg_addr = self.addr(unreg)?;
        let reg_body = block(
            "entry",
            vec![
                Inst::Call { fnty: lib_ty, callee: register, args: vec![desc] },
                Inst::Call { fnty: atexit_ty, callee: atexit, args: vec![unreg_addr] },
                Inst::Ret(None),
            ],
        );
        let unreg_body =
            block("entry", vec![Inst::Call { fnty: lib_ty, callee: unregister, args: vec![desc] }, Inst::Ret(None)]);
        self.set_blocks(reg, vec![reg_body]);
        self.set_blocks(unreg, vec![unreg_body]);
        self.ctor(reg)
    }

    fn set_blocks(&mut self, f: FuncId, blocks: Vec<Block>) {
        if let Some(f) = self.m.function_mut(f) {
            let mut blocks = blocks.into_iter();
            f.body = blocks.next();
            f.more_blocks = blocks.collect();
        }
    }

    fn fatbin(&mut self, hip: bool, image: &'a [u8], start: ConstId, stop: ConstId) -> Result<(), WrapError> {
        let (p, i32, i64, void) = (self.ptr, self.i32, self.i64, self.void);
        let k = if hip { "hip" } else { "cuda" };
        let rt = if hip { "__hip" } else { "__cuda" };
        let (image_section, wrapper_section, magic) = match (hip, self.format) {
            (true, _) => (".hip_fatbin", ".hipFatBinSegment", 0x4849_5046),
            (false, Format::MachO) => ("__NV_CUDA,__nv_fatbin", "__NV_CUDA,__fatbin", 0x4662_43b1),
            (false, _) => (".nv_fatbin", ".nvFatBinSegment", 0x4662_43b1),
        };
        let wrapper_ty = self.m.named_struct_type("fatbin_wrapper", Some(&[i32, i32, p, p]), false);
        let data = self.m.bytes(Cow::Borrowed(image));
        let data_ty = self.m.const_type(data).ok_or(super::ir::IrError::BadId)?;
        let img = self.m.add_global(GlobalVar {
            section: Some(image_section.into()),
            ..internal_const(".fatbin_image", data_ty, data)
        });
        let img = self.m.global_addr(img)?;
        let magic = self.m.int(i32, magic);
        let version = self.m.int(i32, 1);
        let null = self.m.null(p);
        let init = self.m.aggregate(wrapper_ty, &[magic, version, img, null]);
        let wrapper = self.m.add_global(GlobalVar {
            section: Some(wrapper_section.into()),
            align: Some(8),
            ..internal_const(".fatbin_wrapper", wrapper_ty, init)
        });
        let wrapper = self.m.global_addr(wrapper)?;
        let handle_init = self.m.null(p);
        let handle = self.m.add_global(GlobalVar {
            constant: false,
            ..internal_const(&format!(".{k}.binary_handle"), p, handle_init)
        });
        let handle = self.m.global_addr(handle)?;

        let fn_ty = self.m.function_type(void, &[], false);
        let reg = self.m.add_function(startup(&format!(".{k}.fatbin_reg"), fn_ty, Vec::new()));
        let unreg = self.m.add_function(startup(&format!(".{k}.fatbin_unreg"), fn_ty, Vec::new()));
        let (_, reg_fb_ty, reg_fb) = self.declare(&format!("{rt}RegisterFatBinary"), p, &[p])?;
        // Declared for HIP too (with the CUDA name), but only CUDA calls it.
        let end = self.declare("__cudaRegisterFatBinaryEnd", void, &[p])?;
        let end = if hip { None } else { Some(end) };
        let (_, unreg_fb_ty, unreg_fb) = self.declare(&format!("{rt}UnregisterFatBinary"), void, &[p])?;
        let (_, atexit_ty, atexit) = self.declare("atexit", i32, &[p])?;
        let (_, func_ty, reg_func) =
            self.declare(&format!("{rt}RegisterFunction"), i32, &[p, p, p, p, i32, p, p, p, p, p])?;
        let (_, var_ty, reg_var) =
            self.declare(&format!("{rt}RegisterVar"), void, &[p, p, p, p, i32, i64, i32, i32])?;
        let (_, managed_ty, reg_managed) =
            self.declare(&format!("{rt}RegisterManagedVar"), void, &[p, p, p, p, i64, i32])?;
        let (_, surf_ty, reg_surf) = self.declare(&format!("{rt}RegisterSurface"), void, &[p, p, p, p, i32, i32])?;
        let (_, tex_ty, reg_tex) = self.declare(&format!("{rt}RegisterTexture"), void, &[p, p, p, p, i32, i32, i32])?;
        let globals_ty = self.m.function_type(void, &[p], false);
        let globals = self.m.add_function(startup(&format!(".{k}.globals_reg"), globals_ty, Vec::new()));
        let globals_addr = self.addr(globals)?;
        let unreg_addr = self.addr(unreg)?;

        // .<k>.fatbin_reg
        let handle_v = Value::Inst(0);
        let mut insts = vec![
            Inst::CallValues { fnty: reg_fb_ty, callee: reg_fb, args: vec![wrapper.into()] },
            Inst::Store { value: handle_v, ptr: handle.into(), align: 8 },
            Inst::CallValues { fnty: globals_ty, callee: globals_addr, args: vec![handle_v] },
        ];
        if let Some((_, end_ty, end)) = end {
            insts.push(Inst::CallValues { fnty: end_ty, callee: end, args: vec![handle_v] });
        }
        insts.push(Inst::Call { fnty: atexit_ty, callee: atexit, args: vec![unreg_addr] });
        insts.push(Inst::Ret(None));
        self.set_blocks(reg, vec![block("entry", insts)]);

        // .<k>.fatbin_unreg
        let insts = vec![
            Inst::Load { ty: p, ptr: handle.into(), align: 8 },
            Inst::CallValues { fnty: unreg_fb_ty, callee: unreg_fb, args: vec![Value::Inst(0)] },
            Inst::Ret(None),
        ];
        self.set_blocks(unreg, vec![block("entry", insts)]);

        // .<k>.globals_reg: walk the entry table.
        let (entry, i16) = (self.entry, self.i16);
        let c32 = |b: &mut Self, v: u64| b.m.int(i32, v);
        let (z32, m1) = (c32(self, 0), c32(self, u64::from(u32::MAX)));
        let (z64, one64) = (self.m.int(i64, 0), self.m.int(i64, 1));
        let kind_code = self.m.int(i16, if hip { 4 } else { 2 });
        let null_p = self.m.null(p);
        let (entry_bb, while_entry, if_kind, if_then, if_else) =
            (BlockId(0), BlockId(1), BlockId(2), BlockId(3), BlockId(4));
        let (sw_global, sw_managed, sw_surface, sw_texture, if_end, while_end) =
            (BlockId(5), BlockId(6), BlockId(7), BlockId(8), BlockId(9), BlockId(10));
        // Instruction numbers (counted over all blocks) of the values used.
        let arg = Value::Arg(0);
        let mut n = 0u32;
        let mut next = |count: u32| {
            let at = n;
            n += count;
            Value::Inst(at)
        };
        let cmp_nonempty = next(1);
        next(1); // br
        let cur = next(1); // phi
        let mut field = Vec::new();
        for _ in 0..7 {
            next(1); // gep
            field.push(next(1)); // load
        }
        let (addr, aux, kind, name, size, flags, data) =
            (field[0], field[1], field[2], field[3], field[4], field[5], field[6]);
        let data32 = next(1);
        let ty_v = next(1);
        next(1); // and
        let extern_v = next(1);
        next(1); // and
        let constant_v = next(1);
        next(1); // and
        let normalized = next(1);
        let is_kind = next(1);
        next(1); // br
        let is_func = next(1);
        let body_entry = vec![
            Inst::ICmp { pred: IntPredicate::Ne, lhs: start.into(), rhs: stop.into() },
            Inst::CondBr { cond: cmp_nonempty, then: while_entry, otherwise: while_end },
        ];

        let mut w = Vec::new();
        // The phi's second value: the next entry, computed in if.end.
        let next_entry_placeholder = Value::Inst(u32::MAX);
        w.push(named(
            "entry1",
            Inst::Phi { ty: p, incoming: vec![(start.into(), entry_bb), (next_entry_placeholder, if_end)] },
        ));
        let fields: [(&str, u64, TypeId, u64); 7] = [
            ("addr", 4, p, 8),
            ("aux_addr", 8, p, 8),
            ("kind", 2, i16, 2),
            ("name", 5, p, 8),
            ("size", 6, i64, 4),
            ("flags", 3, i32, 4),
            ("data", 7, i64, 4),
        ];
        for (fname, index, ty, align) in fields {
            let idx = c32(self, index);
            w.push(Inst::Gep { inbounds: true, source: entry, base: cur, indices: vec![z32.into(), idx.into()] });
            let gep = Value::Inst(body_entry.len() as u32 + w.len() as u32 - 1);
            w.push(named(fname, Inst::Load { ty, ptr: gep, align }));
        }
        w.push(Inst::Cast { op: CastOp::Trunc, value: data, ty: i32 });
        let mask = |b: &mut Self, v: u64| Value::Const(b.m.int(i32, v));
        let m7 = mask(self, 7);
        w.push(named("type", Inst::BinOp { op: BinOp::And, lhs: flags, rhs: m7 }));
        for (nm, bit, shift) in [("extern", 8, 3), ("constant", 16, 4), ("normalized", 32, 5)] {
            let mb = mask(self, bit);
            w.push(Inst::BinOp { op: BinOp::And, lhs: flags, rhs: mb });
            let and_v = Value::Inst(body_entry.len() as u32 + w.len() as u32 - 1);
            let sh = mask(self, shift);
            w.push(named(nm, Inst::BinOp { op: BinOp::LShr, lhs: and_v, rhs: sh }));
        }
        debug_assert_eq!(Value::Inst(body_entry.len() as u32 + w.len() as u32 - 1), normalized);
        w.push(Inst::ICmp { pred: IntPredicate::Eq, lhs: kind, rhs: kind_code.into() });
        w.push(Inst::CondBr { cond: is_kind, then: if_kind, otherwise: if_end });

        let if_kind_b = vec![
            Inst::ICmp { pred: IntPredicate::Eq, lhs: size, rhs: z64.into() },
            Inst::CondBr { cond: is_func, then: if_then, otherwise: if_else },
        ];
        let if_then_b = vec![
            Inst::CallValues {
                fnty: func_ty,
                callee: reg_func,
                args: vec![
                    arg,
                    addr,
                    name,
                    name,
                    m1.into(),
                    null_p.into(),
                    null_p.into(),
                    null_p.into(),
                    null_p.into(),
                    null_p.into(),
                ],
            },
            Inst::Br(if_end),
        ];
        let cases = [sw_global, sw_managed, sw_surface, sw_texture]
            .into_iter()
            .enumerate()
            .map(|(i, b)| (self.m.int(i32, i as u64), b))
            .collect();
        let if_else_b = vec![Inst::Switch { ty: i32, value: ty_v, default: if_end, cases }];
        let sw_global_b = vec![
            Inst::CallValues {
                fnty: var_ty,
                callee: reg_var,
                args: vec![arg, addr, name, name, extern_v, size, constant_v, z32.into()],
            },
            Inst::Br(if_end),
        ];
        let sw_managed_b = vec![
            Inst::CallValues { fnty: managed_ty, callee: reg_managed, args: vec![arg, aux, addr, name, size, data32] },
            Inst::Br(if_end),
        ];
        let mut sw_surface_b = Vec::new();
        let mut sw_texture_b = Vec::new();
        if hip {
            sw_surface_b.push(Inst::CallValues {
                fnty: surf_ty,
                callee: reg_surf,
                args: vec![arg, addr, name, name, data32, extern_v],
            });
            sw_texture_b.push(Inst::CallValues {
                fnty: tex_ty,
                callee: reg_tex,
                args: vec![arg, addr, name, name, data32, normalized, extern_v],
            });
        }
        sw_surface_b.push(Inst::Br(if_end));
        sw_texture_b.push(Inst::Br(if_end));
        let before_end = body_entry.len()
            + w.len()
            + if_kind_b.len()
            + if_then_b.len()
            + if_else_b.len()
            + sw_global_b.len()
            + sw_managed_b.len()
            + sw_surface_b.len()
            + sw_texture_b.len();
        let next_entry = Value::Inst(before_end as u32);
        let at_end = Value::Inst(before_end as u32 + 1);
        if let Some(Inst::Named(_, phi)) = w.first_mut()
            && let Inst::Phi { incoming, .. } = phi.as_mut()
            && let Some(last) = incoming.last_mut()
        {
            last.0 = next_entry;
        }
        let if_end_b = vec![
            Inst::Gep { inbounds: true, source: entry, base: cur, indices: vec![one64.into()] },
            Inst::ICmp { pred: IntPredicate::Eq, lhs: next_entry, rhs: stop.into() },
            Inst::CondBr { cond: at_end, then: while_end, otherwise: while_entry },
        ];
        let blocks = vec![
            block("entry", body_entry),
            block("while.entry", w),
            block("if.kind", if_kind_b),
            block("if.then", if_then_b),
            block("if.else", if_else_b),
            block("sw.global", sw_global_b),
            block("sw.managed", sw_managed_b),
            block("sw.surface", sw_surface_b),
            block("sw.texture", sw_texture_b),
            block("if.end", if_end_b),
            block("while.end", vec![Inst::Ret(None)]),
        ];
        self.set_blocks(globals, blocks);
        self.ctor(reg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::bitcode::tests::decode;
    use crate::wrapper::ir::Type;

    #[test]
    fn object_formats_of_triples() {
        for (t, f) in [
            ("x86_64-pc-linux-gnu", Format::Other),
            ("x86_64-pc-windows-msvc", Format::Coff),
            ("x86_64-w64-windows-gnu", Format::Coff),
            ("x86_64-pc-windows-elf", Format::Other),
            ("x86_64-unknown-uefi", Format::Coff),
            ("x86_64-apple-darwin", Format::MachO),
            ("arm64-apple-macosx14.0.0", Format::MachO),
            ("x86_64-apple-ios-macho", Format::MachO),
            ("foo", Format::Other),
            ("", Format::Other),
        ] {
            assert_eq!(object_format(t), f, "{t}");
        }
    }

    #[test]
    fn cuda_and_hip_take_one_image() {
        for kind in [Kind::Cuda, Kind::Hip] {
            assert_eq!(build(kind, DEFAULT_TRIPLE, &[]).err(), Some(WrapError::SingleImage));
            assert_eq!(build(kind, DEFAULT_TRIPLE, &[b"a", b"b"]).err(), Some(WrapError::SingleImage));
            assert!(build(kind, DEFAULT_TRIPLE, &[b""]).is_ok());
        }
        assert!(build(Kind::OpenMp, DEFAULT_TRIPLE, &[]).is_ok());
        assert_eq!(
            WrapError::SingleImage.to_string(),
            "CUDA / HIP offloading uses a single fatbinary or offload bundle"
        );
        for k in [Kind::OpenMp, Kind::Cuda, Kind::Hip] {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
        assert_eq!(Kind::from_name("sycl"), None);
    }

    fn global_names(kind: Kind, triple: &str, images: &[&[u8]]) -> Vec<String> {
        build(kind, triple, images).unwrap().globals().iter().map(|g| g.name.clone()).collect()
    }

    #[test]
    fn globals_per_kind_and_format() {
        assert_eq!(
            global_names(Kind::OpenMp, "x86_64-pc-linux-gnu", &[b"a", b"b"]),
            [
                "__start_llvm_offload_entries",
                "__stop_llvm_offload_entries",
                "__dummy.llvm_offload_entries",
                "llvm.compiler.used",
                ".omp_offloading.device_image",
                ".omp_offloading.device_image.1",
                ".omp_offloading.device_images",
                ".omp_offloading.descriptor",
                "llvm.global_ctors",
            ]
        );
        assert_eq!(
            global_names(Kind::OpenMp, "nvptx64-nvidia-cuda", &[b"a", b"b"])[5],
            ".omp_offloading.device_image1"
        );
        let coff = global_names(Kind::Hip, "x86_64-pc-windows-msvc", &[b"a"]);
        assert_eq!(
            coff,
            [
                "__start_llvm_offload_entries",
                "__stop_llvm_offload_entries",
                ".fatbin_image",
                ".fatbin_wrapper",
                ".hip.binary_handle",
                "llvm.global_ctors",
            ]
        );
        let m = build(Kind::Cuda, "x86_64-apple-darwin", &[b"a"]).unwrap();
        let sections: Vec<_> = m.globals().iter().filter_map(|g| g.section.as_deref()).collect();
        assert_eq!(
            sections,
            ["llvm_offload_entries$OA", "llvm_offload_entries$OZ", "__NV_CUDA,__nv_fatbin", "__NV_CUDA,__fatbin"]
        );
    }

    #[test]
    fn entry_walk_shape() {
        let m = build(Kind::Cuda, DEFAULT_TRIPLE, &[b"fatbin"]).unwrap();
        let f = m.functions().iter().find(|f| f.name == ".cuda.globals_reg").unwrap();
        let blocks: Vec<&str> = f.body.iter().chain(&f.more_blocks).map(|b| b.name.as_str()).collect();
        assert_eq!(
            blocks,
            [
                "entry",
                "while.entry",
                "if.kind",
                "if.then",
                "if.else",
                "sw.global",
                "sw.managed",
                "sw.surface",
                "sw.texture",
                "if.end",
                "while.end"
            ]
        );
        // The phi's back edge is the if.end GEP, the first instruction there.
        let count: usize = f.body.iter().chain(&f.more_blocks).take(9).map(|b| b.insts.len()).sum();
        let Some(Inst::Named(name, phi)) = f.more_blocks[0].insts.first() else { panic!("no phi") };
        assert_eq!(name, "entry1");
        assert!(
            matches!(phi.as_ref(), Inst::Phi { incoming, .. } if incoming[1] == (Value::Inst(count as u32), BlockId(9)))
        );
        assert!(matches!(f.more_blocks[8].insts[0], Inst::Gep { .. }));
    }

    /// An OffloadBinary input hands libomptarget its first entry's image;
    /// anything else is handed whole, and a binary too short for the
    /// fields LLVM reads is refused.
    #[test]
    fn openmp_images_inside_offload_binaries() {
        let img = crate::offload_binary::Image {
            offload_kind: crate::offload_binary::OffloadKind::OpenMp,
            strings: vec![(b"triple", b"x86_64-pc-linux-gnu"), (b"arch", b"generic")],
            image: b"\x7fELF-device-image",
            ..Default::default()
        };
        let bin = crate::offload_binary::write(&img).unwrap();
        let at = bin.windows(img.image.len()).position(|w| w == img.image).unwrap() as u64;
        assert!(at > 0);
        assert_eq!(openmp_image_range(&bin), Some((at, at + img.image.len() as u64)));
        assert_eq!(openmp_image_range(b"plain image"), Some((0, 11)));
        assert_eq!(openmp_image_range(b""), Some((0, 0)));
        for cut in [4, 23, 24, 71] {
            assert_eq!(openmp_image_range(&bin[..cut]), None, "{cut}");
        }
        // Offsets are taken as written (LLVM 22 does not check them).
        let mut lying = bin.clone();
        let entry = u64::from_le_bytes(bin[16..24].try_into().unwrap()) as usize;
        lying[entry + 32..entry + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(openmp_image_range(&lying), Some((at, at.wrapping_add(u64::MAX))));
        lying[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(openmp_image_range(&lying), None);
        let err = build(Kind::OpenMp, DEFAULT_TRIPLE, &[b"ok", &bin[..30]]).err();
        assert_eq!(err, Some(WrapError::TruncatedOffloadBinary { index: 1 }));
        assert!(build(Kind::OpenMp, DEFAULT_TRIPLE, &[&bin, &bin[..72]]).is_ok());
    }

    #[test]
    fn pointers_are_opaque_in_the_bitcode() {
        for kind in [Kind::OpenMp, Kind::Cuda, Kind::Hip] {
            let m = build(kind, DEFAULT_TRIPLE, &[b"image"]).unwrap();
            assert!(!m.types().iter().any(|t| matches!(t, Type::Pointer { .. })));
            let bytes = crate::wrapper::bitcode::to_vec(&m).unwrap();
            let top = decode(&bytes);
            let types = top[1].block(17);
            assert_eq!(types.records(25).len(), 1, "one `ptr` type");
            assert!(types.records(8).is_empty(), "no typed pointer");
            let functions = m.functions().iter().filter(|f| f.body.is_some()).count();
            assert_eq!(top[1].blocks(12).count(), functions);
        }
    }
}
