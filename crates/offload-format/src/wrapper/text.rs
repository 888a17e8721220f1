//! Textual LLVM IR (`.ll`) for a [`Module`], printed exactly as `llvm-dis`
//! of LLVM 14 prints the module after reading our bitcode: the same layout,
//! type order, quoting and escapes. Two things come from LLVM 14's reader
//! rather than from the module: the `; ModuleID` line names what was read
//! (the caller passes it), and AMDGPU triples get the datalayout `G1` that
//! the reader adds to a module without one.

use super::bitcode::implicit_dso_local;
use super::ir::{Const, ConstId, GlobalRef, Inst, Linkage, Module, Type, TypeId, UnnamedAddr, Visibility};
use super::triple;
use std::collections::HashSet;
use std::fmt::Write as _;

/// The module as text. `module_id` is shown in the `; ModuleID` line.
pub fn to_text(m: &Module<'_>, module_id: &str) -> String {
    let p = Printer { m };
    let mut out = String::new();
    p.module(&mut out, module_id);
    out
}

struct Printer<'p, 'a> {
    m: &'p Module<'a>,
}

/// `isalnum` or one of `-._`: characters LLVM prints in names unquoted.
fn plain_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_')
}

/// LLVM's `printEscapedString`: `\` doubled, other printable ASCII except
/// `"` as is, everything else as `\XX` (upper-case hex).
fn escape(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        if b == b'\\' {
            out.push_str("\\\\");
        } else if (0x20..0x7f).contains(&b) && b != b'"' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\{b:02X}");
        }
    }
}

/// A name with its sigil (none for labels), quoted when it holds other
/// characters or starts with a digit.
fn name(out: &mut String, sigil: &str, n: &str) {
    out.push_str(sigil);
    let b = n.as_bytes();
    let quote = b.first().is_some_and(u8::is_ascii_digit) || !b.iter().all(|&c| plain_name_char(c));
    if quote {
        out.push('"');
        escape(out, b);
        out.push('"');
    } else {
        out.push_str(n);
    }
}

fn linkage(l: Linkage) -> &'static str {
    match l {
        Linkage::External => "",
        Linkage::Internal => "internal ",
        Linkage::Private => "private ",
        Linkage::Appending => "appending ",
        Linkage::WeakAny => "weak ",
        Linkage::WeakOdr => "weak_odr ",
        Linkage::LinkOnceAny => "linkonce ",
        Linkage::LinkOnceOdr => "linkonce_odr ",
        Linkage::ExternWeak => "extern_weak ",
        Linkage::Common => "common ",
    }
}

fn visibility(l: Linkage, v: Visibility) -> &'static str {
    match (l.is_local(), v) {
        (true, _) | (_, Visibility::Default) => "",
        (_, Visibility::Hidden) => "hidden ",
        (_, Visibility::Protected) => "protected ",
    }
}

fn unnamed_addr(u: UnnamedAddr) -> &'static str {
    match u {
        UnnamedAddr::None => "",
        UnnamedAddr::Global => "unnamed_addr",
        UnnamedAddr::Local => "local_unnamed_addr",
    }
}

impl Printer<'_, '_> {
    fn module(&self, out: &mut String, module_id: &str) {
        let m = self.m;
        if !module_id.is_empty() && !module_id.contains('\n') {
            let _ = writeln!(out, "; ModuleID = '{module_id}'");
        }
        if !m.source_filename.is_empty() {
            out.push_str("source_filename = \"");
            escape(out, m.source_filename.as_bytes());
            out.push_str("\"\n");
        }
        let mut datalayout = m.datalayout.clone();
        if triple::is_amdgpu(&m.triple) && !datalayout.contains("-G") && !datalayout.starts_with('G') {
            datalayout = if datalayout.is_empty() { "G1".into() } else { datalayout + "-G1" };
        }
        if !datalayout.is_empty() {
            let _ = writeln!(out, "target datalayout = \"{datalayout}\"");
        }
        if !m.triple.is_empty() {
            let _ = writeln!(out, "target triple = \"{}\"", m.triple);
        }
        let named = self.named_structs();
        if !named.is_empty() {
            out.push('\n');
        }
        for t in named {
            if let Some(Type::Named { name: n, .. }) = m.ty(t) {
                name(out, "%", n);
                out.push_str(" = type ");
                self.struct_body(out, t);
                out.push('\n');
            }
        }
        if !m.globals.is_empty() {
            out.push('\n');
        }
        for g in &m.globals {
            name(out, "@", &g.name);
            out.push_str(" = ");
            if g.init.is_none() && g.linkage == Linkage::External {
                out.push_str("external ");
            }
            out.push_str(linkage(g.linkage));
            if g.dso_local && !implicit_dso_local(g.linkage, g.visibility) {
                out.push_str("dso_local ");
            }
            out.push_str(visibility(g.linkage, g.visibility));
            let ua = unnamed_addr(g.unnamed_addr);
            if !ua.is_empty() {
                let _ = write!(out, "{ua} ");
            }
            if g.addrspace != 0 {
                let _ = write!(out, "addrspace({}) ", g.addrspace);
            }
            out.push_str(if g.constant { "constant " } else { "global " });
            self.ty(out, g.ty);
            if let Some(init) = g.init {
                out.push(' ');
                self.constant(out, init);
            }
            if let Some(s) = &g.section {
                out.push_str(", section \"");
                escape(out, s.as_bytes());
                out.push('"');
            }
            if let Some(a) = g.align {
                let _ = write!(out, ", align {a}");
            }
            out.push('\n');
        }
        for f in &m.functions {
            out.push('\n');
            self.function(out, f);
        }
    }

    fn function(&self, out: &mut String, f: &super::ir::Function) {
        out.push_str(if f.body.is_none() { "declare " } else { "define " });
        out.push_str(linkage(f.linkage));
        if f.dso_local && !implicit_dso_local(f.linkage, f.visibility) {
            out.push_str("dso_local ");
        }
        out.push_str(visibility(f.linkage, f.visibility));
        let Some(Type::Function { ret, params, vararg }) = self.m.ty(f.ty) else {
            out.push_str("<invalid function type>\n");
            return;
        };
        self.ty(out, *ret);
        out.push(' ');
        name(out, "@", &f.name);
        out.push('(');
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.ty(out, *p);
            if f.body.is_some() {
                let _ = write!(out, " %{i}");
            }
        }
        if *vararg {
            if !params.is_empty() {
                out.push_str(", ");
            }
            out.push_str("...");
        }
        out.push(')');
        let ua = unnamed_addr(f.unnamed_addr);
        if !ua.is_empty() {
            let _ = write!(out, " {ua}");
        }
        if let Some(s) = &f.section {
            out.push_str(" section \"");
            escape(out, s.as_bytes());
            out.push('"');
        }
        if let Some(a) = f.align {
            let _ = write!(out, " align {a}");
        }
        let Some(body) = &f.body else {
            out.push('\n');
            return;
        };
        out.push_str(" {");
        // Unnamed values are numbered: parameters, an unnamed entry block,
        // then instruction results.
        let mut slot = params.len();
        if body.name.is_empty() {
            slot += 1;
        } else {
            out.push('\n');
            name(out, "", &body.name);
            out.push(':');
        }
        out.push('\n');
        for inst in &body.insts {
            out.push_str("  ");
            match inst {
                Inst::Call { fnty, callee, args } => {
                    let Some(Type::Function { ret, vararg, .. }) = self.m.ty(*fnty) else { continue };
                    if !matches!(self.m.ty(*ret), Some(Type::Void)) {
                        let _ = write!(out, "%{slot} = ");
                        slot += 1;
                    }
                    out.push_str("call ");
                    if *vararg {
                        self.ty(out, *fnty);
                    } else {
                        self.ty(out, *ret);
                    }
                    out.push(' ');
                    self.constant(out, *callee);
                    out.push('(');
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        self.typed_constant(out, *a);
                    }
                    out.push(')');
                }
                Inst::Ret(None) => out.push_str("ret void"),
                Inst::Ret(Some(v)) => {
                    out.push_str("ret ");
                    self.typed_constant(out, *v);
                }
                // LLVM 14 modules never hold the value-taking instructions of
                // the LLVM 22 wrapper module; that one is compared with
                // `llvm-dis` of LLVM 22 instead of being printed here.
                _ => out.push_str("; instruction not printed in LLVM 14 form"),
            }
            out.push('\n');
        }
        out.push_str("}\n");
    }

    /// Identified structs in the order LLVM's printer finds them: walking
    /// globals (their pointer type, then their initializer), then functions
    /// (pointer type, then instruction operands).
    fn named_structs(&self) -> Vec<TypeId> {
        let mut finder =
            TypeFinder { m: self.m, seen_types: HashSet::new(), seen_consts: HashSet::new(), found: Vec::new() };
        for g in &self.m.globals {
            finder.ty(self.pointer_to(g.ty, g.addrspace));
            if let Some(init) = g.init {
                finder.constant(init);
            }
        }
        for f in &self.m.functions {
            finder.ty(self.pointer_to(f.ty, 0));
            if let Some(body) = &f.body {
                for inst in &body.insts {
                    match inst {
                        Inst::Call { fnty, callee, args } => {
                            if let Some(Type::Function { ret, .. }) = self.m.ty(*fnty) {
                                finder.ty(Some(*ret));
                            }
                            finder.constant(*callee);
                            for a in args {
                                finder.constant(*a);
                            }
                        }
                        Inst::Ret(Some(v)) => finder.constant(*v),
                        _ => {}
                    }
                }
            }
        }
        finder.found
    }

    fn pointer_to(&self, t: TypeId, addrspace: u32) -> Option<TypeId> {
        let want = Type::Pointer { pointee: t, addrspace };
        self.m.types.iter().position(|x| *x == want).map(|i| TypeId(i as u32))
    }

    fn ty(&self, out: &mut String, t: TypeId) {
        match self.m.ty(t) {
            None => out.push_str("<invalid type>"),
            Some(Type::Void) => out.push_str("void"),
            Some(Type::Int(b)) => {
                let _ = write!(out, "i{b}");
            }
            Some(Type::OpaquePointer { addrspace }) => {
                out.push_str("ptr");
                if *addrspace != 0 {
                    let _ = write!(out, " addrspace({addrspace})");
                }
            }
            Some(Type::Pointer { pointee, addrspace }) => {
                self.ty(out, *pointee);
                if *addrspace != 0 {
                    let _ = write!(out, " addrspace({addrspace})");
                }
                out.push('*');
            }
            Some(Type::Array { len, elem }) => {
                let _ = write!(out, "[{len} x ");
                self.ty(out, *elem);
                out.push(']');
            }
            Some(Type::Function { ret, params, vararg }) => {
                self.ty(out, *ret);
                out.push_str(" (");
                for (i, p) in params.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.ty(out, *p);
                }
                if *vararg {
                    if !params.is_empty() {
                        out.push_str(", ");
                    }
                    out.push_str("...");
                }
                out.push(')');
            }
            Some(Type::Struct { .. }) => self.struct_body(out, t),
            Some(Type::Named { name: n, .. }) => name(out, "%", n),
        }
    }

    fn struct_body(&self, out: &mut String, t: TypeId) {
        let (fields, packed) = match self.m.ty(t) {
            Some(Type::Struct { fields, packed }) => (fields, *packed),
            Some(Type::Named { fields: Some(fields), packed, .. }) => (fields, *packed),
            _ => {
                out.push_str("opaque");
                return;
            }
        };
        if packed {
            out.push('<');
        }
        if fields.is_empty() {
            out.push_str("{}");
        } else {
            out.push_str("{ ");
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                self.ty(out, *f);
            }
            out.push_str(" }");
        }
        if packed {
            out.push('>');
        }
    }

    fn typed_constant(&self, out: &mut String, c: ConstId) {
        match self.m.const_type(c) {
            Some(t) => self.ty(out, t),
            None => out.push_str("<invalid type>"),
        }
        out.push(' ');
        self.constant(out, c);
    }

    fn constant(&self, out: &mut String, c: ConstId) {
        let Some(k) = self.m.constant(c) else {
            out.push_str("<badref>");
            return;
        };
        match k {
            Const::Null(t) => out.push_str(match self.m.ty(*t) {
                Some(Type::Int(1)) => "false",
                Some(Type::Int(_)) => "0",
                Some(Type::Pointer { .. } | Type::OpaquePointer { .. }) => "null",
                _ => "zeroinitializer",
            }),
            Const::Int { ty, value } => {
                if matches!(self.m.ty(*ty), Some(Type::Int(1))) {
                    out.push_str("true");
                } else {
                    let _ = write!(out, "{value}");
                }
            }
            Const::Bytes { data, .. } => {
                out.push_str("c\"");
                escape(out, data);
                out.push('"');
            }
            Const::Aggregate { ty, elems } => match self.m.ty(*ty) {
                Some(Type::Array { .. }) => {
                    out.push('[');
                    for (i, e) in elems.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        self.typed_constant(out, *e);
                    }
                    out.push(']');
                }
                Some(Type::Struct { packed, .. }) | Some(Type::Named { packed, .. }) => {
                    if *packed {
                        out.push('<');
                    }
                    out.push('{');
                    if !elems.is_empty() {
                        out.push(' ');
                        for (i, e) in elems.iter().enumerate() {
                            if i > 0 {
                                out.push_str(", ");
                            }
                            self.typed_constant(out, *e);
                        }
                        out.push(' ');
                    }
                    out.push('}');
                    if *packed {
                        out.push('>');
                    }
                }
                _ => out.push_str("<invalid aggregate>"),
            },
            Const::Global { target, .. } => {
                let n = match target {
                    GlobalRef::Var(g) => self.m.global(*g).map(|g| g.name.as_str()),
                    GlobalRef::Func(f) => self.m.function(*f).map(|f| f.name.as_str()),
                };
                name(out, "@", n.unwrap_or("<badref>"));
            }
            Const::Gep { inbounds, source, base, indices, .. } => {
                out.push_str("getelementptr");
                if *inbounds {
                    out.push_str(" inbounds");
                }
                out.push_str(" (");
                self.ty(out, *source);
                out.push_str(", ");
                self.typed_constant(out, *base);
                for i in indices {
                    out.push_str(", ");
                    self.typed_constant(out, *i);
                }
                out.push(')');
            }
            Const::Cast { ty, op, value } => {
                let _ = write!(out, "{} (", op.name());
                self.typed_constant(out, *value);
                out.push_str(" to ");
                self.ty(out, *ty);
                out.push(')');
            }
        }
    }
}

/// LLVM's `TypeFinder`: a pre-order walk with an explicit stack, subtypes
/// pushed in reverse, each type visited once; identified structs are
/// collected in the order they are popped.
struct TypeFinder<'p, 'a> {
    m: &'p Module<'a>,
    seen_types: HashSet<TypeId>,
    seen_consts: HashSet<ConstId>,
    found: Vec<TypeId>,
}

impl TypeFinder<'_, '_> {
    fn ty(&mut self, t: Option<TypeId>) {
        let Some(t) = t else { return };
        if !self.seen_types.insert(t) {
            return;
        }
        let mut stack = vec![t];
        while let Some(t) = stack.pop() {
            let Some(ty) = self.m.ty(t) else { continue };
            if matches!(ty, Type::Named { .. }) {
                self.found.push(t);
            }
            for sub in ty.subtypes().into_iter().rev() {
                if self.seen_types.insert(sub) {
                    stack.push(sub);
                }
            }
        }
    }

    fn constant(&mut self, c: ConstId) {
        let Some(k) = self.m.constant(c) else { return };
        if matches!(k, Const::Global { .. }) || !self.seen_consts.insert(c) {
            return;
        }
        self.ty(Some(k.ty()));
        if let Const::Gep { source, .. } = k {
            self.ty(Some(*source));
        }
        for op in k.operands() {
            self.constant(op);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::ir::{Block, Function, GlobalVar};
    use std::borrow::Cow;

    #[test]
    fn names_and_strings_are_escaped_like_llvm() {
        let mut s = String::new();
        name(&mut s, "@", "plain.name-1_x");
        name(&mut s, "@", "9lives");
        name(&mut s, "@", "a b\"c\\");
        assert_eq!(s, "@plain.name-1_x@\"9lives\"@\"a b\\22c\\\\\"");
        let mut s = String::new();
        escape(&mut s, b"ok \x00\x7f\xff\n~");
        assert_eq!(s, "ok \\00\\7F\\FF\\0A~");
    }

    #[test]
    fn module_header_types_and_globals() {
        let mut m = Module::new("a\"b.c", "amdgcn-amd-amdhsa");
        let i8 = m.int_type(8);
        let i1 = m.int_type(1);
        let packed = m.named_struct_type("p", None, false);
        m.set_struct_body(packed, &[i8, i1], true).unwrap();
        let empty = m.named_struct_type("e", Some(&[]), false);
        let t = m.int(i1, 1);
        let z = m.int(i8, 0);
        let init = m.aggregate(packed, &[z, t]);
        m.add_global(GlobalVar { init: Some(init), addrspace: 3, align: Some(4), ..GlobalVar::new("g", packed) });
        m.add_global(GlobalVar { linkage: Linkage::ExternWeak, ..GlobalVar::new("w", empty) });
        let data = m.bytes(Cow::Borrowed(b"hi\0"));
        let ty = m.const_type(data).unwrap();
        m.add_global(GlobalVar {
            constant: true,
            init: Some(data),
            section: Some("s\"x".into()),
            ..GlobalVar::new("str", ty)
        });
        let void = m.void_type();
        let fty = m.function_type(void, &[i8], true);
        m.add_function(Function {
            body: Some(Block { name: String::new(), insts: vec![Inst::Ret(None)] }),
            ..Function::new("f", fty)
        });
        let text = to_text(&m, "id");
        assert_eq!(
            text,
            "; ModuleID = 'id'\n\
             source_filename = \"a\\22b.c\"\n\
             target datalayout = \"G1\"\n\
             target triple = \"amdgcn-amd-amdhsa\"\n\
             \n\
             %p = type <{ i8, i1 }>\n\
             %e = type {}\n\
             \n\
             @g = addrspace(3) global %p <{ i8 0, i1 true }>, align 4\n\
             @w = extern_weak global %e\n\
             @str = constant [3 x i8] c\"hi\\00\", section \"s\\22x\"\n\
             \n\
             define void @f(i8 %0, ...) {\n  ret void\n}\n"
        );
    }
}
