//! An in-memory LLVM IR module: the part of LLVM's IR model needed to
//! describe modules made of global variables, constants and simple
//! functions, with typed pointers (LLVM 14 reads nothing else).
//!
//! Types are interned (asking twice for `i8*` gives the same [`TypeId`]),
//! except identified (named) structs, which are distinct by construction as
//! in LLVM. Constants are created through [`Module`] methods that apply the
//! canonical forms LLVM's reader would produce anyway (an all-zero array is
//! `zeroinitializer`, an integer 0 is the null value), so that the module
//! prints the same before writing and after LLVM reads it back.
//!
//! Byte-array constants borrow their bytes (`Cow<'a, [u8]>`): a device image
//! stays in its input mapping until the bitcode writer hands it to the output.

use std::borrow::Cow;
use std::collections::HashMap;

/// A type of the module (index into its type table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeId(pub(crate) u32);

/// A constant of the module (index into its constant pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstId(pub(crate) u32);

/// A global variable of the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalId(pub(crate) u32);

/// A function of the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub(crate) u32);

/// An LLVM type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Type {
    /// `void`
    Void,
    /// `iN`
    Int(u32),
    /// An opaque pointer `ptr addrspace(N)` (LLVM 15 and later; the
    /// pointer type of a module with [`Module::opaque_pointers`] set).
    OpaquePointer {
        /// The address space (0: default).
        addrspace: u32,
    },
    /// Typed pointer `T addrspace(N)*`.
    Pointer {
        /// The type pointed to.
        pointee: TypeId,
        /// The address space (0: default).
        addrspace: u32,
    },
    /// `[N x T]`
    Array {
        /// Number of elements.
        len: u64,
        /// Element type.
        elem: TypeId,
    },
    /// `RET (PARAMS...)`
    Function {
        /// Return type.
        ret: TypeId,
        /// Parameter types.
        params: Vec<TypeId>,
        /// Takes `...` after the parameters.
        vararg: bool,
    },
    /// A literal (anonymous) struct `{ ... }` or `<{ ... }>`.
    Struct {
        /// Field types.
        fields: Vec<TypeId>,
        /// `<{ ... }>`: no padding between fields.
        packed: bool,
    },
    /// An identified struct `%name = type { ... }`; `fields: None` is opaque.
    Named {
        /// The name without `%`.
        name: String,
        /// Field types; `None` for an opaque struct.
        fields: Option<Vec<TypeId>>,
        /// No padding between fields.
        packed: bool,
    },
}

impl Type {
    /// The types this type is built from, in LLVM's order ("subtypes"):
    /// a function's return type comes before its parameters.
    pub fn subtypes(&self) -> Vec<TypeId> {
        match self {
            Type::Void | Type::Int(_) | Type::OpaquePointer { .. } => Vec::new(),
            Type::Pointer { pointee, .. } => vec![*pointee],
            Type::Array { elem, .. } => vec![*elem],
            Type::Function { ret, params, .. } => std::iter::once(*ret).chain(params.iter().copied()).collect(),
            Type::Struct { fields, .. } => fields.clone(),
            Type::Named { fields, .. } => fields.clone().unwrap_or_default(),
        }
    }
}

/// Where a reference to a global value points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GlobalRef {
    /// A global variable.
    Var(GlobalId),
    /// A function.
    Func(FuncId),
}

/// Cast operators of constant expressions (LLVM's bitcode numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CastOp {
    /// `trunc`
    Trunc = 0,
    /// `zext`
    ZExt = 1,
    /// `sext`
    SExt = 2,
    /// `ptrtoint`
    PtrToInt = 9,
    /// `inttoptr`
    IntToPtr = 10,
    /// `bitcast`
    BitCast = 11,
    /// `addrspacecast`
    AddrSpaceCast = 12,
}

impl CastOp {
    /// The operator's name in textual IR.
    pub fn name(self) -> &'static str {
        match self {
            CastOp::Trunc => "trunc",
            CastOp::ZExt => "zext",
            CastOp::SExt => "sext",
            CastOp::PtrToInt => "ptrtoint",
            CastOp::IntToPtr => "inttoptr",
            CastOp::BitCast => "bitcast",
            CastOp::AddrSpaceCast => "addrspacecast",
        }
    }
}

/// A constant value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Const<'a> {
    /// The null value of its type: `0`, `null` or `zeroinitializer`.
    Null(TypeId),
    /// A non-zero integer of at most 64 bits, stored sign-extended.
    Int {
        /// The constant's type.
        ty: TypeId,
        /// The value, sign-extended.
        value: i64,
    },
    /// An `[N x i8]` array with at least one non-zero byte.
    Bytes {
        /// The constant's type.
        ty: TypeId,
        /// The bytes.
        data: Cow<'a, [u8]>,
    },
    /// A struct or array with at least one non-null element.
    Aggregate {
        /// The constant's type.
        ty: TypeId,
        /// The elements or fields, in order.
        elems: Vec<ConstId>,
    },
    /// The address of a global variable or function.
    Global {
        /// The constant's type.
        ty: TypeId,
        /// The global whose address it is.
        target: GlobalRef,
    },
    /// `getelementptr [inbounds] (source, base, indices...)`
    Gep {
        /// The constant's type.
        ty: TypeId,
        /// `inbounds` given.
        inbounds: bool,
        /// The type the indices step through.
        source: TypeId,
        /// The base pointer.
        base: ConstId,
        /// The indices.
        indices: Vec<ConstId>,
    },
    /// `<op> (value to ty)`
    Cast {
        /// The type cast to.
        ty: TypeId,
        /// The operator.
        op: CastOp,
        /// The value cast.
        value: ConstId,
    },
}

impl Const<'_> {
    /// The type of the constant.
    pub fn ty(&self) -> TypeId {
        match self {
            Const::Null(ty)
            | Const::Int { ty, .. }
            | Const::Bytes { ty, .. }
            | Const::Aggregate { ty, .. }
            | Const::Global { ty, .. }
            | Const::Gep { ty, .. }
            | Const::Cast { ty, .. } => *ty,
        }
    }

    /// The constants this one is built from (not global addresses).
    pub fn operands(&self) -> Vec<ConstId> {
        match self {
            Const::Null(_) | Const::Int { .. } | Const::Bytes { .. } | Const::Global { .. } => Vec::new(),
            Const::Aggregate { elems, .. } => elems.clone(),
            Const::Gep { base, indices, .. } => std::iter::once(*base).chain(indices.iter().copied()).collect(),
            Const::Cast { value, .. } => vec![*value],
        }
    }
}

/// Linkage of a global value (the subset a module like ours uses, plus the
/// common ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Linkage {
    /// `external` (the default).
    #[default]
    External,
    /// `internal`
    Internal,
    /// `private`
    Private,
    /// `appending`
    Appending,
    /// `weak`
    WeakAny,
    /// `weak_odr`
    WeakOdr,
    /// `linkonce`
    LinkOnceAny,
    /// `linkonce_odr`
    LinkOnceOdr,
    /// `extern_weak`
    ExternWeak,
    /// `common`
    Common,
}

impl Linkage {
    /// `internal` or `private`: not visible outside the module.
    pub fn is_local(self) -> bool {
        matches!(self, Linkage::Internal | Linkage::Private)
    }
}

/// Symbol visibility of a global value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Visibility {
    /// `default`
    #[default]
    Default,
    /// `hidden`
    Hidden,
    /// `protected`
    Protected,
}

/// Whether a global value's address is significant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnnamedAddr {
    /// The address is significant.
    #[default]
    None,
    /// `unnamed_addr`
    Global,
    /// `local_unnamed_addr`
    Local,
}

/// A global variable; a declaration when `init` is `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalVar {
    /// The name without `@`.
    pub name: String,
    /// The value type (the variable's own type is a pointer to it).
    pub ty: TypeId,
    /// `constant` rather than `global`.
    pub constant: bool,
    /// The initializer; `None` for a declaration.
    pub init: Option<ConstId>,
    /// Linkage.
    pub linkage: Linkage,
    /// Visibility.
    pub visibility: Visibility,
    /// `unnamed_addr` setting.
    pub unnamed_addr: UnnamedAddr,
    /// An explicit section.
    pub section: Option<String>,
    /// Alignment in bytes (a power of two), or none.
    pub align: Option<u64>,
    /// The address space it lives in.
    pub addrspace: u32,
    /// Explicit `dso_local` (implied anyway for local linkage and
    /// non-default visibility).
    pub dso_local: bool,
}

impl GlobalVar {
    /// An external, default-visibility, non-constant declaration.
    pub fn new(name: impl Into<String>, ty: TypeId) -> Self {
        GlobalVar {
            name: name.into(),
            ty,
            constant: false,
            init: None,
            linkage: Linkage::External,
            visibility: Visibility::Default,
            unnamed_addr: UnnamedAddr::None,
            section: None,
            align: None,
            addrspace: 0,
            dso_local: false,
        }
    }
}

/// A value an instruction of [`Inst`]'s value-taking variants uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Value {
    /// A constant (including global addresses).
    Const(ConstId),
    /// The function's N-th argument.
    Arg(u32),
    /// The result of the function's N-th instruction, counting every
    /// instruction of every block in order (phi nodes may refer forward).
    Inst(u32),
}

impl From<ConstId> for Value {
    fn from(c: ConstId) -> Self {
        Value::Const(c)
    }
}

/// A basic block of a function: 0 is [`Function::body`], N is
/// `more_blocks[N - 1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockId(pub u32);

/// Integer binary operators (LLVM's bitcode numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinOp {
    /// `add`
    Add = 0,
    /// `shl`
    Shl = 7,
    /// `lshr`
    LShr = 8,
    /// `and`
    And = 10,
    /// `or`
    Or = 11,
}

/// Integer and pointer comparison predicates (LLVM's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IntPredicate {
    /// `eq`
    Eq = 32,
    /// `ne`
    Ne = 33,
}

/// An instruction. The first two variants take constants only (what an
/// LLVM 14 wrapper module needs); the others take any [`Value`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Inst {
    /// `call <fnty> <callee>(<args>)` with the C calling convention.
    Call {
        /// The callee's function type.
        fnty: TypeId,
        /// The function called.
        callee: ConstId,
        /// The arguments.
        args: Vec<ConstId>,
    },
    /// `ret void` or `ret <value>`.
    Ret(Option<ConstId>),
    /// The instruction with a name (`%name = ...`).
    Named(String, Box<Inst>),
    /// `call <fnty> <callee>(<args>)` with any values as arguments.
    CallValues {
        /// The callee's function type.
        fnty: TypeId,
        /// The function called.
        callee: ConstId,
        /// The arguments.
        args: Vec<Value>,
    },
    /// `load <ty>, ptr <ptr>, align <align>`
    Load {
        /// The type loaded.
        ty: TypeId,
        /// The address.
        ptr: Value,
        /// Alignment in bytes (a power of two).
        align: u64,
    },
    /// `store <value>, ptr <ptr>, align <align>`
    Store {
        /// The value stored.
        value: Value,
        /// The address.
        ptr: Value,
        /// Alignment in bytes (a power of two).
        align: u64,
    },
    /// `<op> <value> to <ty>`
    Cast {
        /// The operator.
        op: CastOp,
        /// The value cast.
        value: Value,
        /// The type cast to.
        ty: TypeId,
    },
    /// `<op> <lhs>, <rhs>` on integers.
    BinOp {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: Value,
        /// Right operand.
        rhs: Value,
    },
    /// `icmp <pred> <lhs>, <rhs>`
    ICmp {
        /// The predicate.
        pred: IntPredicate,
        /// Left operand.
        lhs: Value,
        /// Right operand.
        rhs: Value,
    },
    /// `getelementptr [inbounds] <source>, <base>, <indices...>`
    Gep {
        /// `inbounds`
        inbounds: bool,
        /// The type the indices step through.
        source: TypeId,
        /// The base pointer.
        base: Value,
        /// The indices.
        indices: Vec<Value>,
    },
    /// `phi <ty> [value, block]...`
    Phi {
        /// The type of the values.
        ty: TypeId,
        /// Incoming values and the blocks they come from.
        incoming: Vec<(Value, BlockId)>,
    },
    /// `br label <target>`
    Br(BlockId),
    /// `br i1 <cond>, label <then>, label <else>`
    CondBr {
        /// The condition.
        cond: Value,
        /// Where to go when true.
        then: BlockId,
        /// Where to go when false.
        otherwise: BlockId,
    },
    /// `switch <ty> <value>, label <default> [ <case>, label <block> ... ]`
    Switch {
        /// The integer type of the value and the cases.
        ty: TypeId,
        /// The value switched on.
        value: Value,
        /// Where to go for other values.
        default: BlockId,
        /// Integer constants and their blocks.
        cases: Vec<(ConstId, BlockId)>,
    },
}

impl Inst {
    /// The instruction without its name.
    pub fn unnamed(&self) -> &Inst {
        match self {
            Inst::Named(_, i) => i.unnamed(),
            i => i,
        }
    }
}

/// A basic block; an empty name leaves it unnamed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Block {
    /// The label, or empty.
    pub name: String,
    /// The instructions; the last one is the terminator.
    pub insts: Vec<Inst>,
}

/// A function: a declaration when `body` is `None`, otherwise a definition
/// with one basic block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The name without `@`.
    pub name: String,
    /// The function type (not a pointer to it).
    pub ty: TypeId,
    /// Linkage.
    pub linkage: Linkage,
    /// Visibility.
    pub visibility: Visibility,
    /// `unnamed_addr` setting.
    pub unnamed_addr: UnnamedAddr,
    /// An explicit section.
    pub section: Option<String>,
    /// Alignment in bytes (a power of two), or none.
    pub align: Option<u64>,
    /// Explicit `dso_local`.
    pub dso_local: bool,
    /// The (first) basic block; `None` for a declaration.
    pub body: Option<Block>,
    /// The blocks after the first, in order.
    pub more_blocks: Vec<Block>,
}

impl Function {
    /// An external declaration.
    pub fn new(name: impl Into<String>, ty: TypeId) -> Self {
        Function {
            name: name.into(),
            ty,
            linkage: Linkage::External,
            visibility: Visibility::Default,
            unnamed_addr: UnnamedAddr::None,
            section: None,
            align: None,
            dso_local: false,
            body: None,
            more_blocks: Vec::new(),
        }
    }
}

/// Misuse of the module-building API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IrError {
    /// A `getelementptr` whose indices do not fit its type (why).
    #[error("invalid getelementptr: {0}")]
    BadGep(&'static str),
    /// An ID from another module.
    #[error("reference to a type, constant or global that is not in this module")]
    BadId,
}

/// An LLVM module.
#[derive(Clone, Debug, Default)]
pub struct Module<'a> {
    /// The `source_filename` record.
    pub source_filename: String,
    /// The target triple.
    pub triple: String,
    /// Empty: no `target datalayout` record.
    pub datalayout: String,
    /// Pointer types are opaque (`ptr`): [`Module::ptr_type_in`] gives
    /// [`Type::OpaquePointer`] whatever the pointee. LLVM 15 and later.
    pub opaque_pointers: bool,
    pub(crate) types: Vec<Type>,
    type_ids: HashMap<Type, TypeId>,
    named_struct_suffix: u32,
    pub(crate) consts: Vec<Const<'a>>,
    pub(crate) globals: Vec<GlobalVar>,
    pub(crate) functions: Vec<Function>,
}

impl<'a> Module<'a> {
    /// An empty module.
    pub fn new(source_filename: impl Into<String>, triple: impl Into<String>) -> Self {
        Module { source_filename: source_filename.into(), triple: triple.into(), ..Module::default() }
    }

    /// Every type, in creation order.
    pub fn types(&self) -> &[Type] {
        &self.types
    }
    /// The type with this ID.
    pub fn ty(&self, id: TypeId) -> Option<&Type> {
        self.types.get(id.0 as usize)
    }
    /// Every constant, in creation order.
    pub fn consts(&self) -> &[Const<'a>] {
        &self.consts
    }
    /// The constant with this ID.
    pub fn constant(&self, id: ConstId) -> Option<&Const<'a>> {
        self.consts.get(id.0 as usize)
    }
    /// Every global variable, in creation order.
    pub fn globals(&self) -> &[GlobalVar] {
        &self.globals
    }
    /// The global variable with this ID.
    pub fn global(&self, id: GlobalId) -> Option<&GlobalVar> {
        self.globals.get(id.0 as usize)
    }
    /// The global variable with this ID, to change.
    pub fn global_mut(&mut self, id: GlobalId) -> Option<&mut GlobalVar> {
        self.globals.get_mut(id.0 as usize)
    }
    /// Every function, in creation order.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }
    /// The function with this ID.
    pub fn function(&self, id: FuncId) -> Option<&Function> {
        self.functions.get(id.0 as usize)
    }
    /// The function with this ID, to change.
    pub fn function_mut(&mut self, id: FuncId) -> Option<&mut Function> {
        self.functions.get_mut(id.0 as usize)
    }

    // ---- types -------------------------------------------------------

    fn intern(&mut self, t: Type) -> TypeId {
        if let Some(&id) = self.type_ids.get(&t) {
            return id;
        }
        let id = TypeId(self.types.len() as u32);
        self.types.push(t.clone());
        self.type_ids.insert(t, id);
        id
    }

    /// `void`
    pub fn void_type(&mut self) -> TypeId {
        self.intern(Type::Void)
    }
    /// `iN` for `bits` = N.
    pub fn int_type(&mut self, bits: u32) -> TypeId {
        self.intern(Type::Int(bits))
    }
    /// A pointer to `pointee` in address space 0.
    pub fn ptr_type(&mut self, pointee: TypeId) -> TypeId {
        self.ptr_type_in(pointee, 0)
    }
    /// A pointer to `pointee` in `addrspace`.
    pub fn ptr_type_in(&mut self, pointee: TypeId, addrspace: u32) -> TypeId {
        if self.opaque_pointers {
            return self.intern(Type::OpaquePointer { addrspace });
        }
        self.intern(Type::Pointer { pointee, addrspace })
    }
    /// `[len x elem]`
    pub fn array_type(&mut self, elem: TypeId, len: u64) -> TypeId {
        self.intern(Type::Array { len, elem })
    }
    /// A function type.
    pub fn function_type(&mut self, ret: TypeId, params: &[TypeId], vararg: bool) -> TypeId {
        self.intern(Type::Function { ret, params: params.to_vec(), vararg })
    }
    /// A literal struct type.
    pub fn struct_type(&mut self, fields: &[TypeId], packed: bool) -> TypeId {
        self.intern(Type::Struct { fields: fields.to_vec(), packed })
    }

    /// A new identified struct. A name already taken gets a `.N` suffix, as
    /// LLVM does.
    pub fn named_struct_type(&mut self, name: &str, fields: Option<&[TypeId]>, packed: bool) -> TypeId {
        let taken = |types: &[Type], n: &str| types.iter().any(|t| matches!(t, Type::Named { name, .. } if name == n));
        let mut unique = name.to_string();
        while taken(&self.types, &unique) {
            unique = format!("{name}.{}", self.named_struct_suffix);
            self.named_struct_suffix += 1;
        }
        let id = TypeId(self.types.len() as u32);
        self.types.push(Type::Named { name: unique, fields: fields.map(<[TypeId]>::to_vec), packed });
        id
    }

    /// Gives an opaque identified struct its body.
    pub fn set_struct_body(&mut self, id: TypeId, body: &[TypeId], is_packed: bool) -> Result<(), IrError> {
        match self.types.get_mut(id.0 as usize) {
            Some(Type::Named { fields, packed, .. }) => {
                *fields = Some(body.to_vec());
                *packed = is_packed;
                Ok(())
            }
            _ => Err(IrError::BadId),
        }
    }

    // ---- constants ---------------------------------------------------

    fn push_const(&mut self, c: Const<'a>) -> ConstId {
        let id = ConstId(self.consts.len() as u32);
        self.consts.push(c);
        id
    }

    fn is_null(&self, c: ConstId) -> bool {
        matches!(self.constant(c), Some(Const::Null(_)))
    }

    /// The type of a constant.
    pub fn const_type(&self, c: ConstId) -> Option<TypeId> {
        self.constant(c).map(Const::ty)
    }

    /// `0`, `null` or `zeroinitializer` of `ty`.
    pub fn null(&mut self, ty: TypeId) -> ConstId {
        self.push_const(Const::Null(ty))
    }

    /// An integer of type `ty` (`iN`, N ≤ 64): `value` is truncated to N bits.
    pub fn int(&mut self, ty: TypeId, value: u64) -> ConstId {
        let bits = match self.ty(ty) {
            Some(Type::Int(b)) => (*b).min(64),
            _ => 64,
        };
        let shift = 64 - bits.max(1);
        let value = ((value << shift) as i64) >> shift;
        if value == 0 { self.null(ty) } else { self.push_const(Const::Int { ty, value }) }
    }

    /// An `[N x i8]` array holding `data` (`zeroinitializer` if all zero).
    pub fn bytes(&mut self, data: Cow<'a, [u8]>) -> ConstId {
        let i8 = self.int_type(8);
        let ty = self.array_type(i8, data.len() as u64);
        if data.iter().all(|&b| b == 0) { self.null(ty) } else { self.push_const(Const::Bytes { ty, data }) }
    }

    /// A struct or array constant (`zeroinitializer` if every element is
    /// null or there are none).
    pub fn aggregate(&mut self, ty: TypeId, elems: &[ConstId]) -> ConstId {
        if elems.iter().all(|&e| self.is_null(e)) {
            self.null(ty)
        } else {
            self.push_const(Const::Aggregate { ty, elems: elems.to_vec() })
        }
    }

    /// The address of a global variable.
    pub fn global_addr(&mut self, g: GlobalId) -> Result<ConstId, IrError> {
        let gv = self.global(g).ok_or(IrError::BadId)?;
        let (pointee, addrspace) = (gv.ty, gv.addrspace);
        let ty = self.ptr_type_in(pointee, addrspace);
        Ok(self.push_const(Const::Global { ty, target: GlobalRef::Var(g) }))
    }

    /// The address of a function.
    pub fn function_addr(&mut self, f: FuncId) -> Result<ConstId, IrError> {
        let fty = self.function(f).ok_or(IrError::BadId)?.ty;
        let ty = self.ptr_type(fty);
        Ok(self.push_const(Const::Global { ty, target: GlobalRef::Func(f) }))
    }

    /// `getelementptr [inbounds] (source, base, indices...)`. The result
    /// type is computed as LLVM does: the first index steps over the
    /// pointer, the others into arrays and structs (struct indices must be
    /// integer constants). `inbounds` is inferred where LLVM 14's constant
    /// folder infers it; other folding (normalising out-of-range indices)
    /// is not done, so give indices in LLVM's canonical form.
    pub fn gep(
        &mut self,
        inbounds: bool,
        source: TypeId,
        base: ConstId,
        indices: &[ConstId],
    ) -> Result<ConstId, IrError> {
        self.gep_with(inbounds, true, source, base, indices)
    }

    /// [`Module::gep`] marked `inbounds` only when asked: LLVM 22's
    /// constant folder no longer infers it (a GEP inside a global array
    /// stays plain in LLVM 22's `llvm-offload-wrapper` modules).
    pub fn gep_as_given(
        &mut self,
        inbounds: bool,
        source: TypeId,
        base: ConstId,
        indices: &[ConstId],
    ) -> Result<ConstId, IrError> {
        self.gep_with(inbounds, false, source, base, indices)
    }

    fn gep_with(
        &mut self,
        inbounds: bool,
        infer: bool,
        source: TypeId,
        base: ConstId,
        indices: &[ConstId],
    ) -> Result<ConstId, IrError> {
        let base_ty = self.const_type(base).ok_or(IrError::BadId)?;
        let addrspace = match self.ty(base_ty) {
            Some(Type::Pointer { pointee, addrspace }) if *pointee == source => *addrspace,
            Some(Type::OpaquePointer { addrspace }) => *addrspace,
            Some(Type::Pointer { .. }) => return Err(IrError::BadGep("base does not point to the source type")),
            _ => return Err(IrError::BadGep("base is not a pointer")),
        };
        if indices.is_empty() {
            return Err(IrError::BadGep("no indices"));
        }
        let mut cur = source;
        let mut in_range = true;
        for &idx in &indices[1..] {
            cur = match self.ty(cur) {
                Some(Type::Array { elem, len }) => {
                    in_range &= self.const_index(idx).is_some_and(|i| i >= 0 && (i as u64) < *len);
                    *elem
                }
                Some(Type::Struct { fields, .. }) | Some(Type::Named { fields: Some(fields), .. }) => {
                    let n = match self.constant(idx) {
                        Some(Const::Null(_)) => 0,
                        Some(Const::Int { value, .. }) => usize::try_from(*value).unwrap_or(usize::MAX),
                        _ => return Err(IrError::BadGep("struct index is not an integer constant")),
                    };
                    *fields.get(n).ok_or(IrError::BadGep("struct index out of range"))?
                }
                _ => return Err(IrError::BadGep("index into a type that is not an array or struct")),
            };
        }
        // LLVM 14's constant folder marks a GEP into a global variable
        // inbounds when every index is a constant in range and the first is
        // 0 (or 1 with the others 0, one past the end).
        let on_global = match self.constant(base) {
            Some(Const::Global { target: GlobalRef::Var(g), .. }) => {
                self.global(*g).is_some_and(|g| g.linkage != Linkage::ExternWeak)
            }
            _ => false,
        };
        let rest_zero = indices[1..].iter().all(|&i| self.const_index(i) == Some(0));
        let first = self.const_index(indices[0]);
        let inbounds =
            inbounds || (infer && on_global && in_range && (first == Some(0) || (first == Some(1) && rest_zero)));
        let ty = self.ptr_type_in(cur, addrspace);
        Ok(self.push_const(Const::Gep { ty, inbounds, source, base, indices: indices.to_vec() }))
    }

    /// The value of an integer constant.
    fn const_index(&self, c: ConstId) -> Option<i64> {
        match self.constant(c) {
            Some(Const::Null(t)) if matches!(self.ty(*t), Some(Type::Int(_))) => Some(0),
            Some(Const::Int { value, .. }) => Some(*value),
            _ => None,
        }
    }

    /// A cast constant expression.
    pub fn cast(&mut self, op: CastOp, value: ConstId, to: TypeId) -> ConstId {
        self.push_const(Const::Cast { ty: to, op, value })
    }

    // ---- globals and functions ---------------------------------------

    /// Adds a global variable (its pointer type is added to the type table).
    pub fn add_global(&mut self, g: GlobalVar) -> GlobalId {
        self.ptr_type_in(g.ty, g.addrspace);
        let id = GlobalId(self.globals.len() as u32);
        self.globals.push(g);
        id
    }

    /// Adds a function (its pointer type is added to the type table).
    pub fn add_function(&mut self, f: Function) -> FuncId {
        self.ptr_type(f.ty);
        let id = FuncId(self.functions.len() as u32);
        self.functions.push(f);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_interned_but_named_structs_are_not() {
        let mut m = Module::new("x", "t");
        let i8 = m.int_type(8);
        assert_eq!(m.ptr_type(i8), m.ptr_type(i8));
        let a = m.named_struct_type("s", Some(&[i8]), false);
        let b = m.named_struct_type("s", Some(&[i8]), false);
        assert_ne!(a, b);
        assert!(matches!(m.ty(b), Some(Type::Named { name, .. }) if name == "s.0"));
    }

    #[test]
    fn canonical_constants() {
        let mut m = Module::new("x", "t");
        let i32 = m.int_type(32);
        let z = m.int(i32, 0);
        assert!(matches!(m.constant(z), Some(Const::Null(_))));
        let c = m.int(i32, 0xffff_ffff);
        assert_eq!(m.constant(c), Some(&Const::Int { ty: i32, value: -1 }));
        let z = m.bytes(Cow::Borrowed(&[0, 0, 0]));
        assert!(matches!(m.constant(z), Some(Const::Null(_))));
        let e = m.bytes(Cow::Borrowed(&[]));
        assert!(matches!(m.constant(e), Some(Const::Null(_))));
        let s = m.struct_type(&[i32, i32], false);
        let n = m.null(i32);
        let nn = m.aggregate(s, &[n, n]);
        assert!(matches!(m.constant(nn), Some(Const::Null(_))));
        let nc = m.aggregate(s, &[n, c]);
        assert!(matches!(m.constant(nc), Some(Const::Aggregate { .. })));
    }

    #[test]
    fn gep_result_types() {
        let mut m = Module::new("x", "t");
        let i8 = m.int_type(8);
        let i64 = m.int_type(64);
        let arr = m.array_type(i8, 4);
        let g = m.add_global(GlobalVar::new("g", arr));
        let base = m.global_addr(g).unwrap();
        let zero = m.int(i64, 0);
        let p = m.gep(true, arr, base, &[zero, zero]).unwrap();
        let i8p = m.ptr_type(i8);
        assert_eq!(m.const_type(p), Some(i8p));
        assert!(m.gep(true, i8, base, &[zero]).is_err());
        let i32 = m.int_type(32);
        let s = m.struct_type(&[i8, i64], false);
        let gs = m.add_global(GlobalVar::new("s", s));
        let sb = m.global_addr(gs).unwrap();
        let one = m.int(i32, 1);
        let f = m.gep(false, s, sb, &[zero, one]).unwrap();
        let i64p = m.ptr_type(i64);
        assert_eq!(m.const_type(f), Some(i64p));
        let two = m.int(i32, 2);
        assert!(m.gep(false, s, sb, &[zero, two]).is_err());
    }
}
