//! LLVM bitcode writer for [`Module`]s: the record layout of LLVM's module
//! format version 2 (names in a string table), readable by LLVM 14 and later.
//!
//! File layout: the magic `BC C0 DE`, an IDENTIFICATION block, the MODULE
//! block, a STRTAB block. Inside the module: VERSION, the type table,
//! TRIPLE / DATALAYOUT / SECTIONNAME / SOURCE_FILENAME, one GLOBALVAR and
//! FUNCTION record per global value, VSTOFFSET (forward pointer to the
//! module symbol table), the module-level CONSTANTS block, one FUNCTION
//! block per definition, and the module VALUE_SYMTAB giving each function
//! body's word offset (so LLVM can load bodies lazily).
//!
//! Value numbering follows LLVM: global variables, then functions, then the
//! module-level constants in pool order (operands are always created before
//! their users, so there are no forward references). Types are numbered in
//! a depth-first order where element types precede the types built from
//! them, except that identified structs may be referenced before their body
//! (the reader allows that for them only). Pointers are typed.
//!
//! The identification block names this writer as the producer.

use super::bitstream::{AbbrevOp, BitWriter, TooLong};
use super::ir::{
    CastOp, Const, ConstId, Function, GlobalRef, Inst, Linkage, Module, Type, TypeId, UnnamedAddr, Value, Visibility,
};
use crate::plan::Plan;
use std::borrow::Cow;

/// Why a module cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BitcodeError {
    /// The module breaks a rule of the IR (which).
    #[error("invalid module: {0}")]
    Invalid(&'static str),
    /// A record with more elements than bitcode can count (how many).
    #[error("a record of {0} elements is too large for LLVM bitcode (at most 4294967295)")]
    TooLong(u64),
    /// An alignment that is not a power of two (the value).
    #[error("alignment {0} is not a power of two")]
    BadAlignment(u64),
}

impl From<TooLong> for BitcodeError {
    fn from(e: TooLong) -> Self {
        BitcodeError::TooLong(e.0)
    }
}

/// The producer string of the identification block.
pub const PRODUCER: &str = concat!("offload-binutils ", env!("CARGO_PKG_VERSION"));

// Block IDs.
const MODULE_BLOCK: u64 = 8;
const CONSTANTS_BLOCK: u64 = 11;
const FUNCTION_BLOCK: u64 = 12;
const IDENTIFICATION_BLOCK: u64 = 13;
const VALUE_SYMTAB_BLOCK: u64 = 14;
const TYPE_BLOCK: u64 = 17;
const STRTAB_BLOCK: u64 = 23;

// Record codes.
const IDENT_STRING: u64 = 1;
const IDENT_EPOCH: u64 = 2;
const MOD_VERSION: u64 = 1;
const MOD_TRIPLE: u64 = 2;
const MOD_DATALAYOUT: u64 = 3;
const MOD_SECTIONNAME: u64 = 5;
const MOD_GLOBALVAR: u64 = 7;
const MOD_FUNCTION: u64 = 8;
const MOD_VSTOFFSET: u64 = 13;
const MOD_SOURCE_FILENAME: u64 = 16;
const TYPE_NUMENTRY: u64 = 1;
const TYPE_VOID: u64 = 2;
const TYPE_OPAQUE: u64 = 6;
const TYPE_INTEGER: u64 = 7;
const TYPE_POINTER: u64 = 8;
const TYPE_ARRAY: u64 = 11;
const TYPE_STRUCT_ANON: u64 = 18;
const TYPE_STRUCT_NAME: u64 = 19;
const TYPE_STRUCT_NAMED: u64 = 20;
const TYPE_FUNCTION: u64 = 21;
const TYPE_OPAQUE_POINTER: u64 = 25;
const CST_SETTYPE: u64 = 1;
const CST_NULL: u64 = 2;
const CST_INTEGER: u64 = 4;
const CST_AGGREGATE: u64 = 7;
const CST_STRING: u64 = 8;
const CST_CSTRING: u64 = 9;
const CST_CE_CAST: u64 = 11;
const CST_CE_GEP: u64 = 12;
const CST_CE_INBOUNDS_GEP: u64 = 20;
const FUNC_DECLAREBLOCKS: u64 = 1;
const FUNC_INST_BINOP: u64 = 2;
const FUNC_INST_CAST: u64 = 3;
const FUNC_INST_RET: u64 = 10;
const FUNC_INST_BR: u64 = 11;
const FUNC_INST_SWITCH: u64 = 12;
const FUNC_INST_PHI: u64 = 16;
const FUNC_INST_LOAD: u64 = 20;
const FUNC_INST_CMP2: u64 = 28;
const FUNC_INST_CALL: u64 = 34;
const FUNC_INST_GEP: u64 = 43;
const FUNC_INST_STORE: u64 = 44;
const VST_ENTRY: u64 = 1;
const VST_BBENTRY: u64 = 2;
const VST_FNENTRY: u64 = 3;
const STRTAB_BLOB: u64 = 1;

/// Bit 15 of a call's calling-convention field: the function type is given.
const CALL_EXPLICIT_TYPE: u64 = 1 << 15;

/// Writes `m` as LLVM bitcode. Byte arrays of the module are borrowed by the
/// returned plan, not copied.
pub fn write<'m, 'a: 'm>(m: &'m Module<'a>) -> Result<Plan<'m>, BitcodeError> {
    Writer::new(m)?.write()
}

/// Writes `m` as LLVM bitcode into a byte vector.
pub fn to_vec(m: &Module<'_>) -> Result<Vec<u8>, BitcodeError> {
    write(m).map(|p| p.to_vec())
}

struct Writer<'m, 'a> {
    m: &'m Module<'a>,
    /// Bitcode type number of each TypeId.
    type_no: Vec<u64>,
    /// TypeIds in bitcode order.
    type_order: Vec<TypeId>,
    /// Value number of each constant.
    const_no: Vec<u64>,
    /// Number of module-level values (globals, functions, constants).
    module_values: u64,
    sections: Vec<&'m str>,
    w: BitWriter<'m>,
}

fn bad(what: &'static str) -> BitcodeError {
    BitcodeError::Invalid(what)
}

impl<'m, 'a: 'm> Writer<'m, 'a> {
    fn new(m: &'m Module<'a>) -> Result<Self, BitcodeError> {
        let (type_order, type_no) = number_types(m)?;
        let n_globals = m.globals.len() as u64;
        let mut const_no = Vec::with_capacity(m.consts.len());
        let mut next = n_globals + m.functions.len() as u64;
        for c in &m.consts {
            const_no.push(match c {
                Const::Global { target: GlobalRef::Var(g), .. } => {
                    m.global(*g).ok_or(bad("address of a global that does not exist"))?;
                    u64::from(g.0)
                }
                Const::Global { target: GlobalRef::Func(f), .. } => {
                    m.function(*f).ok_or(bad("address of a function that does not exist"))?;
                    n_globals + u64::from(f.0)
                }
                _ => {
                    next += 1;
                    next - 1
                }
            });
        }
        let mut sections: Vec<&str> = Vec::new();
        let used = m.globals.iter().map(|g| &g.section).chain(m.functions.iter().map(|f| &f.section));
        for s in used.flatten() {
            if !sections.contains(&s.as_str()) {
                sections.push(s);
            }
        }
        Ok(Writer { m, type_no, type_order, const_no, module_values: next, sections, w: BitWriter::new() })
    }

    fn ty(&self, t: TypeId) -> Result<u64, BitcodeError> {
        self.type_no.get(t.0 as usize).copied().ok_or(bad("type that does not exist"))
    }

    fn val(&self, c: ConstId) -> Result<u64, BitcodeError> {
        self.const_no.get(c.0 as usize).copied().ok_or(bad("constant that does not exist"))
    }

    fn cty(&self, c: ConstId) -> Result<u64, BitcodeError> {
        let t = self.m.const_type(c).ok_or(bad("constant that does not exist"))?;
        self.ty(t)
    }

    fn section_no(&self, s: &Option<String>) -> u64 {
        s.as_deref().and_then(|s| self.sections.iter().position(|x| *x == s)).map_or(0, |i| i as u64 + 1)
    }

    fn write(mut self) -> Result<Plan<'m>, BitcodeError> {
        self.w.bytes(b"BC\xC0\xDE");
        self.w.enter_block(IDENTIFICATION_BLOCK, 5);
        self.w.record(IDENT_STRING, &chars(PRODUCER))?;
        self.w.record(IDENT_EPOCH, &[0])?;
        self.w.end_block();

        self.w.enter_block(MODULE_BLOCK, 3);
        self.w.record(MOD_VERSION, &[2])?;
        self.types()?;
        self.w.record(MOD_TRIPLE, &chars(&self.m.triple))?;
        if !self.m.datalayout.is_empty() {
            self.w.record(MOD_DATALAYOUT, &chars(&self.m.datalayout))?;
        }
        for s in self.sections.clone() {
            self.w.record(MOD_SECTIONNAME, &chars(s))?;
        }
        self.w.record(MOD_SOURCE_FILENAME, &chars(&self.m.source_filename))?;
        let strtab = self.global_values()?;
        let has_bodies = self.m.functions.iter().any(|f| f.body.is_some());
        let vst_offset_field = if has_bodies {
            let id = self.w.define_abbrev(&[AbbrevOp::Literal(MOD_VSTOFFSET), AbbrevOp::Fixed(32)]);
            self.w.abbrev_record(id, &[MOD_VSTOFFSET, 0], Cow::Borrowed(&[]))?.first().copied()
        } else {
            None
        };
        self.constants()?;
        let mut bodies = Vec::new();
        for (i, f) in self.m.functions.iter().enumerate() {
            if f.body.is_some() {
                let at = self.w.enter_block(FUNCTION_BLOCK, 4);
                self.function_body(f)?;
                self.w.end_block();
                bodies.push((self.m.globals.len() as u64 + i as u64, at / 32));
            }
        }
        if let Some(field) = vst_offset_field {
            let at = self.w.enter_block(VALUE_SYMTAB_BLOCK, 4);
            for (value, word) in bodies {
                self.w.record(VST_FNENTRY, &[value, word])?;
            }
            self.w.end_block();
            self.w.patch(field, at / 32, 32);
        }
        self.w.end_block();

        self.w.enter_block(STRTAB_BLOCK, 3);
        let id = self.w.define_abbrev(&[AbbrevOp::Literal(STRTAB_BLOB), AbbrevOp::Blob]);
        self.w.abbrev_record(id, &[STRTAB_BLOB], Cow::Owned(strtab))?;
        self.w.end_block();
        Ok(self.w.finish())
    }

    fn types(&mut self) -> Result<(), BitcodeError> {
        self.w.enter_block(TYPE_BLOCK, 4);
        self.w.record(TYPE_NUMENTRY, &[self.type_order.len() as u64])?;
        for &t in &self.type_order.clone() {
            let ty = self.m.ty(t).ok_or(bad("type that does not exist"))?;
            match ty {
                Type::Void => self.w.record(TYPE_VOID, &[])?,
                Type::Int(bits) => self.w.record(TYPE_INTEGER, &[u64::from(*bits)])?,
                Type::OpaquePointer { addrspace } => self.w.record(TYPE_OPAQUE_POINTER, &[u64::from(*addrspace)])?,
                Type::Pointer { pointee, addrspace } => {
                    self.w.record(TYPE_POINTER, &[self.ty(*pointee)?, u64::from(*addrspace)])?
                }
                Type::Array { len, elem } => self.w.record(TYPE_ARRAY, &[*len, self.ty(*elem)?])?,
                Type::Function { ret, params, vararg } => {
                    let mut ops = vec![u64::from(*vararg), self.ty(*ret)?];
                    for p in params {
                        ops.push(self.ty(*p)?);
                    }
                    self.w.record(TYPE_FUNCTION, &ops)?
                }
                Type::Struct { fields, packed } => {
                    let ops = self.struct_ops(*packed, fields)?;
                    self.w.record(TYPE_STRUCT_ANON, &ops)?
                }
                Type::Named { name, fields, packed } => {
                    self.w.record(TYPE_STRUCT_NAME, &chars(name))?;
                    match fields {
                        Some(fields) => {
                            let ops = self.struct_ops(*packed, fields)?;
                            self.w.record(TYPE_STRUCT_NAMED, &ops)?
                        }
                        None => self.w.record(TYPE_OPAQUE, &[0])?,
                    }
                }
            }
        }
        self.w.end_block();
        Ok(())
    }

    fn struct_ops(&self, packed: bool, fields: &[TypeId]) -> Result<Vec<u64>, BitcodeError> {
        let mut ops = vec![u64::from(packed)];
        for f in fields {
            ops.push(self.ty(*f)?);
        }
        Ok(ops)
    }

    /// GLOBALVAR and FUNCTION records; returns the string table.
    fn global_values(&mut self) -> Result<Vec<u8>, BitcodeError> {
        let mut strtab = Vec::new();
        let mut name = |n: &str| {
            let at = strtab.len() as u64;
            strtab.extend_from_slice(n.as_bytes());
            (at, n.len() as u64)
        };
        let mut records = Vec::new();
        for g in &self.m.globals {
            let (off, len) = name(&g.name);
            let init = match g.init {
                Some(c) => self.val(c)? + 1,
                None => 0,
            };
            let flags = u64::from(g.constant) | 2 | (u64::from(g.addrspace) << 2);
            let dso_local = g.dso_local || implicit_dso_local(g.linkage, g.visibility);
            records.push((
                MOD_GLOBALVAR,
                vec![
                    off,
                    len,
                    self.ty(g.ty)?,
                    flags,
                    init,
                    linkage(g.linkage),
                    align(g.align)?,
                    self.section_no(&g.section),
                    visibility(g.linkage, g.visibility),
                    0, // thread_local
                    unnamed_addr(g.unnamed_addr),
                    0, // externally_initialized
                    0, // dllstorageclass
                    0, // comdat
                    0, // attributes
                    u64::from(dso_local),
                    0, // partition name offset
                    0, // partition name size
                ],
            ));
        }
        for f in &self.m.functions {
            let (off, len) = name(&f.name);
            match self.m.ty(f.ty) {
                Some(Type::Function { .. }) => {}
                _ => return Err(bad("function whose type is not a function type")),
            }
            let dso_local = f.dso_local || implicit_dso_local(f.linkage, f.visibility);
            records.push((
                MOD_FUNCTION,
                vec![
                    off,
                    len,
                    self.ty(f.ty)?,
                    0, // calling convention: C
                    u64::from(f.body.is_none()),
                    linkage(f.linkage),
                    0, // attributes
                    align(f.align)?,
                    self.section_no(&f.section),
                    visibility(f.linkage, f.visibility),
                    0, // gc
                    unnamed_addr(f.unnamed_addr),
                    0, // prologue data
                    0, // dllstorageclass
                    0, // comdat
                    0, // prefix data
                    0, // personality
                    u64::from(dso_local),
                    0, // address space
                    0, // partition name offset
                    0, // partition name size
                ],
            ));
        }
        for (code, ops) in records {
            self.w.record(code, &ops)?;
        }
        Ok(strtab)
    }

    fn constants(&mut self) -> Result<(), BitcodeError> {
        let m = self.m;
        self.w.enter_block(CONSTANTS_BLOCK, 4);
        let string = self.w.define_abbrev(&[AbbrevOp::Literal(CST_STRING), AbbrevOp::Blob]);
        let cstring = self.w.define_abbrev(&[AbbrevOp::Literal(CST_CSTRING), AbbrevOp::Blob]);
        let mut current_type = None;
        for c in &m.consts {
            if matches!(c, Const::Global { .. }) {
                continue;
            }
            let t = self.ty(c.ty())?;
            if current_type != Some(t) {
                self.w.record(CST_SETTYPE, &[t])?;
                current_type = Some(t);
            }
            match c {
                Const::Global { .. } => {}
                Const::Null(_) => self.w.record(CST_NULL, &[])?,
                Const::Int { value, .. } => self.w.record(CST_INTEGER, &[signed_vbr(*value)])?,
                Const::Bytes { data, .. } => {
                    // LLVM's own choice: a C string when the only NUL is the
                    // last byte (which is then implied).
                    let bytes: &'m [u8] = data;
                    match bytes.split_last() {
                        Some((0, body)) if !body.contains(&0) => {
                            self.w.abbrev_record(cstring, &[CST_CSTRING], Cow::Borrowed(body))?;
                        }
                        _ => {
                            self.w.abbrev_record(string, &[CST_STRING], Cow::Borrowed(bytes))?;
                        }
                    }
                }
                Const::Aggregate { elems, .. } => {
                    let ops = elems.iter().map(|&e| self.val(e)).collect::<Result<Vec<_>, _>>()?;
                    self.w.record(CST_AGGREGATE, &ops)?
                }
                Const::Gep { inbounds, source, base, indices, .. } => {
                    let mut ops = vec![self.ty(*source)?];
                    for &op in std::iter::once(base).chain(indices) {
                        ops.push(self.cty(op)?);
                        ops.push(self.val(op)?);
                    }
                    let code = if *inbounds { CST_CE_INBOUNDS_GEP } else { CST_CE_GEP };
                    self.w.record(code, &ops)?
                }
                Const::Cast { op, value, .. } => {
                    let ops = [cast_code(*op), self.cty(*value)?, self.val(*value)?];
                    self.w.record(CST_CE_CAST, &ops)?
                }
            }
        }
        self.w.end_block();
        Ok(())
    }

    /// Whether an instruction defines a value (takes a value number).
    fn defines_value(&self, inst: &Inst) -> Result<bool, BitcodeError> {
        Ok(match inst {
            Inst::Named(_, i) => self.defines_value(i)?,
            Inst::Call { fnty, .. } | Inst::CallValues { fnty, .. } => match self.m.ty(*fnty) {
                Some(Type::Function { ret, .. }) => !matches!(self.m.ty(*ret), Some(Type::Void)),
                _ => return Err(bad("call whose type is not a function type")),
            },
            Inst::Load { .. }
            | Inst::Cast { .. }
            | Inst::BinOp { .. }
            | Inst::ICmp { .. }
            | Inst::Gep { .. }
            | Inst::Phi { .. } => true,
            Inst::Ret(_) | Inst::Store { .. } | Inst::Br(_) | Inst::CondBr { .. } | Inst::Switch { .. } => false,
        })
    }

    fn function_body(&mut self, f: &Function) -> Result<(), BitcodeError> {
        let nparams = match self.m.ty(f.ty) {
            Some(Type::Function { params, .. }) => params.len() as u64,
            _ => return Err(bad("function whose type is not a function type")),
        };
        let blocks: Vec<&super::ir::Block> = f.body.iter().chain(&f.more_blocks).collect();
        self.w.record(FUNC_DECLAREBLOCKS, &[blocks.len() as u64])?;
        let first = self.module_values + nparams;
        // The value number of each instruction's result, if it has one.
        let mut results = Vec::new();
        let mut next = first;
        for inst in blocks.iter().flat_map(|b| &b.insts) {
            if self.defines_value(inst)? {
                results.push(Some(next));
                next += 1;
            } else {
                results.push(None);
            }
        }
        let value_no = |this: &Self, v: Value| -> Result<u64, BitcodeError> {
            match v {
                Value::Const(c) => this.val(c),
                Value::Arg(n) if u64::from(n) < nparams => Ok(this.module_values + u64::from(n)),
                Value::Arg(_) => Err(bad("argument the function does not have")),
                Value::Inst(n) => {
                    results.get(n as usize).copied().flatten().ok_or(bad("use of an instruction without a result"))
                }
            }
        };
        let block_no = |b: super::ir::BlockId| -> Result<u64, BitcodeError> {
            if (b.0 as usize) < blocks.len() {
                Ok(u64::from(b.0))
            } else {
                Err(bad("branch to a block that does not exist"))
            }
        };
        // Value number the next instruction result would get; operands are
        // encoded relative to it.
        let mut cur = first;
        let mut names = Vec::new();
        for (index, inst) in blocks.iter().flat_map(|b| &b.insts).enumerate() {
            let rel = |this: &Self, v: Value| -> Result<u64, BitcodeError> {
                let n = value_no(this, v)?;
                if n >= cur { Err(bad("forward reference outside a phi")) } else { Ok(cur - n) }
            };
            if let (Inst::Named(name, _), Some(Some(n))) = (inst, results.get(index)) {
                names.push((*n, name.as_str()));
            }
            match inst.unnamed() {
                Inst::Named(..) => {}
                Inst::Call { fnty, callee, args } => {
                    let mut ops = vec![0, CALL_EXPLICIT_TYPE, self.ty(*fnty)?, cur - self.val(*callee)?];
                    for &a in args {
                        ops.push(cur - self.val(a)?);
                    }
                    self.w.record(FUNC_INST_CALL, &ops)?;
                }
                Inst::CallValues { fnty, callee, args } => {
                    let mut ops = vec![0, CALL_EXPLICIT_TYPE, self.ty(*fnty)?, rel(self, Value::Const(*callee))?];
                    for &a in args {
                        ops.push(rel(self, a)?);
                    }
                    self.w.record(FUNC_INST_CALL, &ops)?;
                }
                Inst::Ret(None) => self.w.record(FUNC_INST_RET, &[])?,
                Inst::Ret(Some(v)) => self.w.record(FUNC_INST_RET, &[cur - self.val(*v)?])?,
                Inst::Load { ty, ptr, align: a } => {
                    let ops = [rel(self, *ptr)?, self.ty(*ty)?, align(Some(*a))?, 0];
                    self.w.record(FUNC_INST_LOAD, &ops)?
                }
                Inst::Store { value, ptr, align: a } => {
                    let ops = [rel(self, *ptr)?, rel(self, *value)?, align(Some(*a))?, 0];
                    self.w.record(FUNC_INST_STORE, &ops)?
                }
                Inst::Cast { op, value, ty } => {
                    let ops = [rel(self, *value)?, self.ty(*ty)?, cast_code(*op)];
                    self.w.record(FUNC_INST_CAST, &ops)?
                }
                Inst::BinOp { op, lhs, rhs } => {
                    let ops = [rel(self, *lhs)?, rel(self, *rhs)?, *op as u64];
                    self.w.record(FUNC_INST_BINOP, &ops)?
                }
                Inst::ICmp { pred, lhs, rhs } => {
                    let ops = [rel(self, *lhs)?, rel(self, *rhs)?, *pred as u64];
                    self.w.record(FUNC_INST_CMP2, &ops)?
                }
                Inst::Gep { inbounds, source, base, indices } => {
                    let mut ops = vec![u64::from(*inbounds), self.ty(*source)?, rel(self, *base)?];
                    for &i in indices {
                        ops.push(rel(self, i)?);
                    }
                    self.w.record(FUNC_INST_GEP, &ops)?
                }
                Inst::Phi { ty, incoming } => {
                    let mut ops = vec![self.ty(*ty)?];
                    for &(v, b) in incoming {
                        let n = value_no(self, v)?;
                        ops.push(signed_vbr((cur as i64).wrapping_sub(n as i64)));
                        ops.push(block_no(b)?);
                    }
                    self.w.record(FUNC_INST_PHI, &ops)?
                }
                Inst::Br(b) => self.w.record(FUNC_INST_BR, &[block_no(*b)?])?,
                Inst::CondBr { cond, then, otherwise } => {
                    let ops = [block_no(*then)?, block_no(*otherwise)?, rel(self, *cond)?];
                    self.w.record(FUNC_INST_BR, &ops)?
                }
                Inst::Switch { ty, value, default, cases } => {
                    let mut ops = vec![self.ty(*ty)?, rel(self, *value)?, block_no(*default)?];
                    for &(c, b) in cases {
                        ops.push(self.val(c)?);
                        ops.push(block_no(b)?);
                    }
                    self.w.record(FUNC_INST_SWITCH, &ops)?
                }
            }
            if results.get(index).copied().flatten().is_some() {
                cur += 1;
            }
        }
        let named_blocks: Vec<(u64, &str)> = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.name.is_empty())
            .map(|(i, b)| (i as u64, b.name.as_str()))
            .collect();
        if !named_blocks.is_empty() || !names.is_empty() {
            self.w.enter_block(VALUE_SYMTAB_BLOCK, 4);
            for (n, name) in names {
                let mut ops = vec![n];
                ops.extend(chars(name));
                self.w.record(VST_ENTRY, &ops)?;
            }
            for (i, name) in named_blocks {
                let mut ops = vec![i];
                ops.extend(chars(name));
                self.w.record(VST_BBENTRY, &ops)?;
            }
            self.w.end_block();
        }
        Ok(())
    }
}

/// Numbers the types so that a type's elements come before it, except that
/// identified structs may be referenced before they are defined (as LLVM's
/// writer does).
fn number_types(m: &Module<'_>) -> Result<(Vec<TypeId>, Vec<u64>), BitcodeError> {
    const UNSEEN: u64 = u64::MAX;
    const IN_PROGRESS: u64 = u64::MAX - 1;
    fn visit(m: &Module<'_>, t: TypeId, no: &mut [u64], order: &mut Vec<TypeId>) -> Result<(), BitcodeError> {
        let i = t.0 as usize;
        let ty = m.ty(t).ok_or(bad("type that does not exist"))?;
        if no[i] != UNSEEN {
            return Ok(());
        }
        if matches!(ty, Type::Named { .. }) {
            no[i] = IN_PROGRESS;
        }
        for sub in ty.subtypes() {
            visit(m, sub, no, order)?;
        }
        if no[i] != UNSEEN && no[i] != IN_PROGRESS {
            return Ok(());
        }
        no[i] = order.len() as u64;
        order.push(t);
        Ok(())
    }
    let mut no = vec![UNSEEN; m.types.len()];
    let mut order = Vec::with_capacity(m.types.len());
    for i in 0..m.types.len() {
        visit(m, TypeId(i as u32), &mut no, &mut order)?;
    }
    Ok((order, no))
}

fn chars(s: &str) -> Vec<u64> {
    s.bytes().map(u64::from).collect()
}

fn signed_vbr(v: i64) -> u64 {
    if v >= 0 { (v as u64) << 1 } else { (v.unsigned_abs() << 1) | 1 }
}

fn cast_code(op: CastOp) -> u64 {
    op as u64
}

fn linkage(l: Linkage) -> u64 {
    match l {
        Linkage::External => 0,
        Linkage::Appending => 2,
        Linkage::Internal => 3,
        Linkage::ExternWeak => 7,
        Linkage::Common => 8,
        Linkage::Private => 9,
        Linkage::WeakAny => 16,
        Linkage::WeakOdr => 17,
        Linkage::LinkOnceAny => 18,
        Linkage::LinkOnceOdr => 19,
    }
}

/// Local linkage forces default visibility.
fn visibility(l: Linkage, v: Visibility) -> u64 {
    match (l.is_local(), v) {
        (true, _) | (false, Visibility::Default) => 0,
        (false, Visibility::Hidden) => 1,
        (false, Visibility::Protected) => 2,
    }
}

fn unnamed_addr(u: UnnamedAddr) -> u64 {
    match u {
        UnnamedAddr::None => 0,
        UnnamedAddr::Global => 1,
        UnnamedAddr::Local => 2,
    }
}

/// LLVM treats these as `dso_local` whatever the record says.
pub(crate) fn implicit_dso_local(l: Linkage, v: Visibility) -> bool {
    l.is_local() || (v != Visibility::Default && l != Linkage::ExternWeak)
}

/// Alignment as stored: log2(bytes) + 1, 0 for none.
fn align(a: Option<u64>) -> Result<u64, BitcodeError> {
    match a {
        None => Ok(0),
        Some(b) if b.is_power_of_two() => Ok(u64::from(b.trailing_zeros()) + 1),
        Some(b) => Err(BitcodeError::BadAlignment(b)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wrapper::ir::{Block, Function, GlobalVar};
    use llvm_bitcode::bitcode::{BitcodeElement, Payload};

    /// A decoded block: its ID and its items in order.
    #[derive(Debug)]
    pub(crate) struct Blk {
        pub id: u32,
        pub items: Vec<Item>,
    }

    #[derive(Debug)]
    pub(crate) enum Item {
        Block(Blk),
        /// Code, scalar operands, blob payload.
        Rec(u64, Vec<u64>, Option<Vec<u8>>),
    }

    impl Blk {
        pub fn block(&self, id: u32) -> &Blk {
            self.blocks(id).next().unwrap_or_else(|| panic!("no block {id} in block {}", self.id))
        }
        pub fn blocks(&self, id: u32) -> impl Iterator<Item = &Blk> {
            self.items.iter().filter_map(move |i| match i {
                Item::Block(b) if b.id == id => Some(b),
                _ => None,
            })
        }
        pub fn records(&self, code: u64) -> Vec<(&[u64], Option<&[u8]>)> {
            self.items
                .iter()
                .filter_map(|i| match i {
                    Item::Rec(c, ops, blob) if *c == code => Some((ops.as_slice(), blob.as_deref())),
                    _ => None,
                })
                .collect()
        }
    }

    fn convert(e: BitcodeElement) -> Item {
        match e {
            BitcodeElement::Block(b) => {
                Item::Block(Blk { id: b.id, items: b.elements.into_iter().map(convert).collect() })
            }
            BitcodeElement::Record(mut r) => {
                let mut ops = r.fields().to_vec();
                let blob = match r.take_payload() {
                    Some(Payload::Blob(b)) => Some(b),
                    Some(Payload::Array(a)) => {
                        ops.extend(a);
                        None
                    }
                    Some(Payload::Char6String(s)) => {
                        ops.extend(s.bytes().map(u64::from));
                        None
                    }
                    None => None,
                };
                Item::Rec(r.id, ops, blob)
            }
        }
    }

    /// Decodes a bitcode file with the independent `llvm-bitcode` reader;
    /// returns the top-level blocks.
    pub(crate) fn decode(bytes: &[u8]) -> Vec<Blk> {
        let bc = llvm_bitcode::Bitcode::new(bytes).expect("llvm-bitcode reads our output");
        bc.elements
            .into_iter()
            .map(|e| match convert(e) {
                Item::Block(b) => b,
                Item::Rec(..) => panic!("record at top level"),
            })
            .collect()
    }

    /// A module using more than the wrapper needs: an opaque and a
    /// self-referencing struct, parameters, a call that returns a value,
    /// alignment, several linkages, a cast and a non-inbounds GEP.
    pub(crate) fn general_module() -> Module<'static> {
        let mut m = Module::new("general.c", "x86_64-unknown-linux-gnu");
        let i8 = m.int_type(8);
        let i32 = m.int_type(32);
        let i64 = m.int_type(64);
        let opaque = m.named_struct_type("opaque_t", None, false);
        let node = m.named_struct_type("node", None, false);
        let node_p = m.ptr_type(node);
        m.set_struct_body(node, &[i32, node_p], false).unwrap();
        let opaque_p = m.ptr_type(opaque);
        let g_ext = m.add_global(GlobalVar::new("ext", opaque));
        let ext = m.global_addr(g_ext).unwrap();
        let five = m.int(i32, 5);
        let null_node = m.null(node_p);
        let init = m.aggregate(node, &[five, null_node]);
        let g_node = m.add_global(GlobalVar {
            init: Some(init),
            align: Some(8),
            dso_local: true,
            ..GlobalVar::new("head", node)
        });
        let head = m.global_addr(g_node).unwrap();
        let zero = m.int(i64, 0);
        let one32 = m.int(i32, 1);
        let next = m.gep(false, node, head, &[zero, one32]).unwrap();
        let next_ty = m.const_type(next).unwrap();
        m.add_global(GlobalVar {
            constant: true,
            init: Some(next),
            linkage: Linkage::Private,
            ..GlobalVar::new("next field", next_ty)
        });
        let i8p = m.ptr_type(i8);
        let as_bytes = m.cast(CastOp::BitCast, ext, i8p);
        m.add_global(GlobalVar { init: Some(as_bytes), linkage: Linkage::WeakAny, ..GlobalVar::new("ext_bytes", i8p) });
        let _ = opaque_p;
        let neg = m.int(i64, (-42i64) as u64);
        let get_ty = m.function_type(i64, &[node_p, i32], false);
        let get = m.add_function(Function::new("get", get_ty));
        let callee = m.function_addr(get).unwrap();
        let main_ty = m.function_type(i64, &[i32], false);
        let body = Block {
            name: "start".into(),
            insts: vec![Inst::Call { fnty: get_ty, callee, args: vec![head, five] }, Inst::Ret(Some(neg))],
        };
        m.add_function(Function {
            visibility: Visibility::Protected,
            unnamed_addr: UnnamedAddr::Local,
            body: Some(body),
            ..Function::new("main", main_ty)
        });
        let void = m.void_type();
        let vty = m.function_type(void, &[i32], true);
        let printf = m.add_function(Function::new("printf", vty));
        let pf = m.function_addr(printf).unwrap();
        let v_ty = m.function_type(void, &[], false);
        m.add_function(Function {
            linkage: Linkage::Internal,
            body: Some(Block {
                name: String::new(),
                insts: vec![Inst::Call { fnty: vty, callee: pf, args: vec![five, zero, one32] }, Inst::Ret(None)],
            }),
            ..Function::new("1st", v_ty)
        });
        m
    }

    #[test]
    fn layout_of_blocks() {
        let m = general_module();
        let bytes = to_vec(&m).unwrap();
        assert_eq!(&bytes[..4], b"BC\xC0\xDE");
        assert_eq!(bytes.len() % 4, 0);
        let top = decode(&bytes);
        assert_eq!(top.iter().map(|b| b.id).collect::<Vec<_>>(), [13, 8, 23]);
        let ident = &top[0];
        assert_eq!(ident.records(IDENT_STRING)[0].0, chars(PRODUCER).as_slice());
        assert_eq!(ident.records(IDENT_EPOCH)[0].0, [0]);
        let module = &top[1];
        assert_eq!(module.records(MOD_VERSION)[0].0, [2]);
        assert_eq!(module.records(MOD_TRIPLE)[0].0, chars("x86_64-unknown-linux-gnu").as_slice());
        assert_eq!(module.records(MOD_SOURCE_FILENAME)[0].0, chars("general.c").as_slice());
        assert_eq!(module.blocks(FUNCTION_BLOCK as u32).count(), 2);
        // The string table holds the names the records point at.
        let strtab = top[2].records(STRTAB_BLOB)[0].1.unwrap().to_vec();
        let names: Vec<String> = module
            .records(MOD_GLOBALVAR)
            .iter()
            .chain(module.records(MOD_FUNCTION).iter())
            .map(|(ops, _)| String::from_utf8(strtab[ops[0] as usize..(ops[0] + ops[1]) as usize].to_vec()).unwrap())
            .collect();
        assert_eq!(names, ["ext", "head", "next field", "ext_bytes", "get", "main", "printf", "1st"]);
    }

    #[test]
    fn types_are_defined_before_use_except_identified_structs() {
        let m = general_module();
        let top = decode(&to_vec(&m).unwrap());
        let types = top[1].block(TYPE_BLOCK as u32);
        let mut named = Vec::new();
        let mut defs: Vec<(u64, Vec<u64>)> = Vec::new();
        for item in &types.items {
            let Item::Rec(code, ops, _) = item else { panic!("block inside the type table") };
            match *code {
                TYPE_NUMENTRY | TYPE_STRUCT_NAME => {}
                TYPE_STRUCT_NAMED | TYPE_OPAQUE => {
                    named.push(defs.len() as u64);
                    defs.push((*code, ops.clone()));
                }
                _ => defs.push((*code, ops.clone())),
            }
        }
        assert_eq!(types.records(TYPE_NUMENTRY)[0].0, [defs.len() as u64]);
        assert_eq!(defs.len(), m.types().len());
        for (i, (code, ops)) in defs.iter().enumerate() {
            let refs: Vec<u64> = match *code {
                TYPE_POINTER => vec![ops[0]],
                TYPE_ARRAY => vec![ops[1]],
                TYPE_FUNCTION | TYPE_STRUCT_ANON | TYPE_STRUCT_NAMED => ops[1..].to_vec(),
                _ => vec![],
            };
            for r in refs {
                assert!(r < i as u64 || named.contains(&r), "type {i} refers forward to {r}");
            }
        }
    }

    #[test]
    fn function_bodies_are_found_through_the_symbol_table() {
        let m = general_module();
        let bytes = to_vec(&m).unwrap();
        let top = decode(&bytes);
        let module = &top[1];
        let word = |w: u64| u32::from_le_bytes(bytes[w as usize * 4..w as usize * 4 + 4].try_into().unwrap());
        // ENTER_SUBBLOCK (abbreviation 1 in the module's 3-bit width) + block ID.
        let block_at = |w: u64| {
            let v = word(w);
            assert_eq!(v & 7, 1, "no ENTER_SUBBLOCK at word {w}");
            (v >> 3) & 0xff
        };
        let vst_offset = module.records(MOD_VSTOFFSET)[0].0[0];
        assert_eq!(block_at(vst_offset), VALUE_SYMTAB_BLOCK as u32);
        let vst = module.blocks(VALUE_SYMTAB_BLOCK as u32).next().unwrap();
        let entries = vst.records(VST_FNENTRY);
        // Value numbers of `main` and `1st`: 4 globals, then functions.
        assert_eq!(entries.iter().map(|(ops, _)| ops[0]).collect::<Vec<_>>(), [5, 7]);
        for (ops, _) in entries {
            assert_eq!(block_at(ops[1]), FUNCTION_BLOCK as u32);
        }
    }

    #[test]
    fn instructions_use_relative_value_numbers() {
        let m = general_module();
        let top = decode(&to_vec(&m).unwrap());
        let module = &top[1];
        let n_consts = m.consts().iter().filter(|c| !matches!(c, Const::Global { .. })).count() as u64;
        let values = 4 + 4 + n_consts;
        let main = module.blocks(FUNCTION_BLOCK as u32).next().unwrap();
        let call = main.records(FUNC_INST_CALL)[0].0.to_vec();
        // main has one parameter: the first instruction value is values + 1.
        let first = values + 1;
        assert_eq!(call[1], CALL_EXPLICIT_TYPE);
        assert_eq!(first - call[3], 4, "callee is function 0 (`get`), value 4");
        assert_eq!(first - call[4], 1, "first argument is global `head`, value 1");
        // The call returns i64, so `ret` is relative to first + 1.
        let ret = main.records(FUNC_INST_RET)[0].0.to_vec();
        assert_eq!(ret.len(), 1);
        let vst = main.block(VALUE_SYMTAB_BLOCK as u32);
        assert_eq!(vst.records(VST_BBENTRY)[0].0, [0, 115, 116, 97, 114, 116]);
        // The unnamed entry block of `1st` gets no symbol table.
        let other = module.blocks(FUNCTION_BLOCK as u32).nth(1).unwrap();
        assert_eq!(other.blocks(VALUE_SYMTAB_BLOCK as u32).count(), 0);
        assert_eq!(other.records(FUNC_INST_CALL)[0].0.len(), 4 + 3);
    }

    #[test]
    fn byte_arrays_are_blobs_and_c_strings_drop_the_nul() {
        let images: [&[u8]; 4] = [b"AB\0", b"A\0B", b"\0\0", &[9u8; 600]];
        let mut m = Module::new("b", "x86_64");
        for i in images {
            let c = m.bytes(Cow::Borrowed(i));
            let ty = m.const_type(c).unwrap();
            m.add_global(GlobalVar { init: Some(c), ..GlobalVar::new("g", ty) });
        }
        let plan = write(&m).unwrap();
        // The 600-byte array is referenced, not copied.
        assert!(plan.pieces.iter().any(|p| matches!(p, crate::plan::Piece::Bytes(Cow::Borrowed(b)) if b.len() == 600)));
        let top = decode(&plan.to_vec());
        let consts = top[1].block(CONSTANTS_BLOCK as u32);
        assert_eq!(consts.records(CST_CSTRING).iter().map(|r| r.1.unwrap()).collect::<Vec<_>>(), [&b"AB"[..]]);
        assert_eq!(
            consts.records(CST_STRING).iter().map(|r| r.1.unwrap()).collect::<Vec<_>>(),
            [&b"A\0B"[..], &[9u8; 600][..]]
        );
        assert_eq!(consts.records(CST_NULL).len(), 1);
    }

    #[test]
    fn bad_alignment_and_foreign_ids_are_errors() {
        let mut m = Module::new("b", "x86_64");
        let i8 = m.int_type(8);
        m.add_global(GlobalVar { align: Some(3), ..GlobalVar::new("g", i8) });
        assert_eq!(to_vec(&m), Err(BitcodeError::BadAlignment(3)));
        let mut m = Module::new("b", "x86_64");
        m.add_global(GlobalVar::new("g", TypeId(99)));
        assert!(matches!(to_vec(&m), Err(BitcodeError::Invalid(_))));
    }

    #[test]
    fn signed_vbr_encoding() {
        assert_eq!(signed_vbr(0), 0);
        assert_eq!(signed_vbr(1), 2);
        assert_eq!(signed_vbr(-1), 3);
        assert_eq!(signed_vbr(i64::MIN), 1);
    }
}
