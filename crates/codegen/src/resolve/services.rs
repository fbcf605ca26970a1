//! Services: methods, their args and result structs, and the `extends` chain.
//!
//! Each method gets an args struct and, unless oneway, a result struct and possibly an
//! exception enum; the whole chain shares one namespace, so names Rust would spell alike
//! are numbered (with a warning) and real clashes and cycles are errors.

use std::collections::{HashMap, HashSet};

use crate::ast;
use crate::model::{
    FieldDef, Item, MethodDef, Requiredness, ServiceDef, StreamMethodDef, StreamNames,
    StreamingMode, StructDef, StructKind, ThrowDef, Ty, TypePath,
};
use crate::names;

use super::{DefRef, ResolveError, Resolver};

/// The annotation that makes a method a stream (Kitex's).
const STREAMING_MODE: &str = "streaming.mode";

/// Whether `func` is a streaming method (its mode checked apart).
fn is_stream(func: &ast::Function) -> bool {
    func.ann.iter().any(|a| a.key == STREAMING_MODE)
}

impl<'a> Resolver<'a> {
    /// A service's args and result structs, then the service itself.
    pub(super) fn service_items(
        &self,
        file: usize,
        svc: &'a ast::Service,
    ) -> Result<Vec<Item>, ResolveError> {
        let mut items = Vec::new();
        let mut methods = Vec::new();
        let mut seen = HashSet::new();
        for func in &svc.functions {
            if !seen.insert(func.name.name.as_str()) {
                return Err(self.err(
                    file,
                    func.name.span,
                    format!("method `{}` is defined twice", func.name.name),
                ));
            }
        }
        let mut streams: Vec<StreamMethodDef> = Vec::new();
        // The functions of `methods`, in order: where a clash among them is reported.
        let mut unary = Vec::new();
        for (func, alias) in svc.functions.iter().zip(self.aliases(file, svc)?) {
            if let Some(stream) = self.stream_method(file, func, &alias)? {
                if let Some(first) = streams.iter().find(|s| s.name == stream.name) {
                    return Err(self.err(
                        file,
                        func.name.span,
                        format!(
                            "streaming methods `{}` and `{}` of `{}` are both `{}` in Rust",
                            first.thrift_name, stream.thrift_name, svc.name.name, stream.name
                        ),
                    ));
                }
                streams.push(stream);
                continue;
            }
            let (method, args, result) = self.method(file, svc, func, &alias)?;
            items.push(Item::Struct(args));
            items.extend(result.map(Item::Struct));
            methods.push(method);
            unary.push(func);
        }
        let (extends, inherited) = self.inherited(file, svc)?;

        // One trait method and one reply variant per method of the whole chain. A clash
        // is reported at the later of the service's own methods involved, if any.
        let all: Vec<&MethodDef> = methods.iter().chain(&inherited).collect();
        let any_oneway = all.iter().any(|m| m.oneway);
        let span_of = |i: usize| unary.get(i).map_or(svc.name.span, |f| f.name.span);
        let clash = |first: usize, later: usize, rust: &str| {
            // `first` comes earlier in the chain: its owner is or extends `later`'s.
            let (a, b) = (all[first], all[later]);
            let message = if a.owner == b.owner {
                format!(
                    "methods `{}` and `{}` of `{}` are both `{rust}` in Rust",
                    a.thrift_name, b.thrift_name, a.owner.name
                )
            } else if a.thrift_name == b.thrift_name {
                format!(
                    "method `{}` of `{}` is already a method of `{}`, which it extends",
                    a.thrift_name, a.owner.name, b.owner.name
                )
            } else {
                format!(
                    "method `{}` of `{}` and method `{}` of `{}`, which it extends, are both \
                     `{rust}` in Rust",
                    a.thrift_name, a.owner.name, b.thrift_name, b.owner.name
                )
            };
            let at = if later < unary.len() { later } else { first };
            self.err(file, span_of(at), message)
        };
        let mut rust_names: HashMap<&str, usize> = HashMap::new();
        let mut variants: HashMap<&str, usize> = HashMap::new();
        for (i, m) in all.iter().enumerate() {
            if let Some(&first) = rust_names.get(m.name.as_str()) {
                return Err(clash(first, i, &m.name));
            }
            rust_names.insert(&m.name, i);
            if m.oneway {
                continue;
            }
            if let Some(&first) = variants.get(m.variant.as_str()) {
                return Err(clash(first, i, &m.variant));
            }
            variants.insert(&m.variant, i);
            if any_oneway && m.variant == "Oneway" {
                return Err(self.err(
                    file,
                    span_of(i),
                    format!(
                        "method `{}` clashes with the `Oneway` variant of `{}`'s reply enum",
                        m.thrift_name, svc.name.name
                    ),
                ));
            }
        }

        let name = names::upper_camel(&svc.name.name);
        let generated = |suffix: &str| self.fresh_type(file, format!("{name}{suffix}"), svc);
        let stream_names = (!streams.is_empty()).then(|| StreamNames {
            handler: generated("Stream"),
            server: generated("StreamServer"),
            client: generated("StreamClient"),
        });
        items.push(Item::Service(ServiceDef {
            thrift_name: svc.name.name.clone(),
            reply: generated("Reply"),
            server: generated("Server"),
            client: generated("Client"),
            maker: generated("ClientMaker"),
            name,
            doc: svc.doc.clone(),
            extends,
            methods,
            inherited,
            streams,
            stream_names,
        }));
        Ok(items)
    }

    /// The streaming method `func` declares with Kitex's `streaming.mode` annotation,
    /// or `None` for a ping-pong or oneway method. A streaming method takes one
    /// struct and returns one struct (each message of the stream), and declares no
    /// exceptions: an error ends a stream in its trailer.
    fn stream_method(
        &self,
        file: usize,
        func: &'a ast::Function,
        alias: &str,
    ) -> Result<Option<StreamMethodDef>, ResolveError> {
        let Some(ann) = func.ann.iter().find(|a| a.key == STREAMING_MODE) else {
            return Ok(None);
        };
        let name = &func.name.name;
        let mode = match ann.value.as_str() {
            "server" => StreamingMode::Server,
            "client" => StreamingMode::Client,
            "bidirectional" => StreamingMode::Bidirectional,
            other => {
                return Err(self.err(
                    file,
                    ann.span,
                    format!(
                        "`streaming.mode` of `{name}` is {other:?}: streams over TTHeader are \
                         \"server\", \"client\" or \"bidirectional\""
                    ),
                ));
            }
        };
        if func.oneway {
            return Err(self.err(
                file,
                func.span,
                format!("streaming method `{name}` cannot be oneway"),
            ));
        }
        if !func.throws.is_empty() {
            return Err(self.err(
                file,
                func.span,
                format!(
                    "streaming method `{name}` cannot declare exceptions: an error ends a \
                     stream in its trailer"
                ),
            ));
        }
        let a_struct = |ty: Ty, what: &str| match ty {
            Ty::Struct(p)
                if self
                    .find_struct(&p)
                    .is_some_and(|(_, s)| s.kind == ast::StructKind::Struct) =>
            {
                Ok(p)
            }
            _ => Err(self.err(
                file,
                func.span,
                format!("streaming method `{name}` must {what} a struct: its messages are structs"),
            )),
        };
        let [arg] = func.args.as_slice() else {
            return Err(self.err(
                file,
                func.span,
                format!(
                    "streaming method `{name}` takes {} arguments: it takes one, the struct \
                     of its requests",
                    func.args.len()
                ),
            ));
        };
        let request = a_struct(self.ty(file, &arg.ty, 0)?, "take")?;
        let response = match &func.returns {
            Some(ret) => a_struct(self.ty(file, ret, 0)?, "return")?,
            None => a_struct(Ty::Bool, "return")?,
        };
        let rust_name = names::snake(alias);
        if !names::is_legal(&rust_name) {
            return Err(self.err(
                file,
                func.name.span,
                format!("`{name}` does not make a Rust name"),
            ));
        }
        Ok(Some(StreamMethodDef {
            thrift_name: name.clone(),
            name: rust_name,
            doc: func.doc.clone(),
            mode,
            request,
            response,
        }))
    }

    /// The service `svc` extends, and every method it inherits through its `extends`
    /// chain, the nearest base's first.
    fn inherited(
        &self,
        file: usize,
        svc: &'a ast::Service,
    ) -> Result<(Option<TypePath>, Vec<MethodDef>), ResolveError> {
        let mut extends = None;
        let mut methods = Vec::new();
        let mut chain = vec![(file, svc.name.name.as_str())];
        let mut bases = Vec::new();
        let (mut f, mut s) = (file, svc);
        while let Some(base) = &s.extends {
            let Some((bf, DefRef::Service(bs), None)) = self.lookup(f, &base.name) else {
                return Err(self.err(f, base.span, format!("unknown service `{}`", base.name)));
            };
            let looped = chain.contains(&(bf, bs.name.name.as_str()));
            chain.push((bf, bs.name.name.as_str()));
            if looped {
                let names: Vec<&str> = chain.iter().map(|(_, n)| *n).collect();
                return Err(self.err(
                    f,
                    base.span,
                    format!(
                        "services extend each other in a cycle: {}",
                        names.join(" extends ")
                    ),
                ));
            }
            extends.get_or_insert_with(|| self.path(bf, &bs.name.name));
            bases.push((bf, bs));
            (f, s) = (bf, bs);
        }
        // Only once the chain is known to end: each base's names depend on its own chain.
        for (bf, bs) in bases {
            for (func, alias) in bs.functions.iter().zip(self.aliases(bf, bs)?) {
                // A base's streams are its own: they have no args or result structs to
                // be called with.
                if is_stream(func) {
                    continue;
                }
                methods.push(self.method(bf, bs, func, &alias)?.0);
            }
        }
        Ok((extends, methods))
    }

    /// The names the Rust side of each of `svc`'s own methods is made from: the IDL
    /// name, or, when Rust would spell it like a method of the chain before it (in the
    /// trait, or as a reply variant, `Oneway` included when a method of the chain is
    /// oneway), the IDL name numbered (`get_item_2`), with a warning. Apache Thrift
    /// accepts `getItem` and `get_item` side by side. The same IDL name as a base's
    /// method is left alone: that is an error (the dispatcher routes by it).
    fn aliases(&self, file: usize, svc: &'a ast::Service) -> Result<Vec<String>, ResolveError> {
        let (_, inherited) = self.inherited(file, svc)?;
        let any_oneway =
            inherited.iter().any(|m| m.oneway) || svc.functions.iter().any(|f| f.oneway);
        let mut methods: HashMap<String, String> = inherited
            .iter()
            .map(|m| (m.name.clone(), format!("`{}`", m.thrift_name)))
            .collect();
        // The generated client's own functions (Apache's netstd tests have a method
        // named `client`).
        for own in ["new", "client", "builder"] {
            methods.insert(own.into(), format!("the generated client's own `{own}`"));
        }
        let mut variants: HashMap<String, String> = inherited
            .iter()
            .filter(|m| !m.oneway)
            .map(|m| (m.variant.clone(), format!("`{}`", m.thrift_name)))
            .collect();
        if any_oneway {
            variants.insert(
                "Oneway".into(),
                "the reply enum's `Oneway` variant (for oneway calls)".into(),
            );
        }
        let mut out = Vec::new();
        for func in &svc.functions {
            let name = &func.name.name;
            let inherited_same = inherited.iter().any(|m| m.thrift_name == *name);
            let taken = |alias: &str| {
                methods
                    .get(&names::snake(alias))
                    .or_else(|| {
                        (!func.oneway)
                            .then(|| variants.get(&names::upper_camel(alias)))
                            .flatten()
                    })
                    .cloned()
            };
            let mut alias = name.clone();
            if let (Some(other), false) = (taken(name), inherited_same) {
                alias = (2..)
                    .map(|n| format!("{name}_{n}"))
                    .find(|a| taken(a).is_none())
                    .unwrap_or_default();
                self.warn(
                    file,
                    func.name.span,
                    format!(
                        "method `{name}` of `{}` would be spelled in Rust like {other}; its \
                         Rust names are made from `{alias}`",
                        svc.name.name
                    ),
                );
            }
            methods.insert(names::snake(&alias), format!("`{name}`"));
            if !func.oneway {
                variants.insert(names::upper_camel(&alias), format!("`{name}`"));
            }
            out.push(alias);
        }
        Ok(out)
    }

    /// `wanted`, a type name generated for `svc`, or, if the IDL defines a type of that
    /// name in the same file, the first numbered name it does not (with a warning).
    fn fresh_type(&self, file: usize, wanted: String, svc: &ast::Service) -> String {
        let declared: HashSet<String> = self.defs[file]
            .keys()
            .map(|n| names::upper_camel(n))
            .collect();
        if !declared.contains(&wanted) {
            return wanted;
        }
        let fresh = (2..)
            .map(|n| format!("{wanted}{n}"))
            .find(|n| !declared.contains(n))
            .unwrap_or_default();
        self.warn(
            file,
            svc.name.span,
            format!(
                "`{wanted}`, which codegen makes for service `{}`, is a type the IDL defines; \
                 the generated one is `{fresh}`",
                svc.name.name
            ),
        );
        fresh
    }

    /// One method of `svc`: what its trait and dispatcher need, its args struct and,
    /// unless it is oneway, its result struct. Its Rust names are made from `alias`
    /// (see [`Resolver::aliases`]); on the wire it is its IDL name.
    fn method(
        &self,
        file: usize,
        svc: &'a ast::Service,
        func: &'a ast::Function,
        alias: &str,
    ) -> Result<(MethodDef, StructDef, Option<StructDef>), ResolveError> {
        let local = |name: String| TypePath {
            module: self.modules[file].clone(),
            name,
        };
        let base = format!("{}_{alias}", svc.name.name);
        let generated = |suffix: &str| {
            self.fresh_type(file, names::upper_camel(&format!("{base}_{suffix}")), svc)
        };
        let rust_name = names::snake(alias);
        let variant = names::upper_camel(alias);
        if !names::is_legal(&rust_name) || !names::is_legal(&variant) {
            return Err(self.err(
                file,
                func.name.span,
                format!("`{}` does not make a Rust name", func.name.name),
            ));
        }
        let params = self.field_list(file, &func.args, false)?;
        let args = StructDef {
            thrift_name: format!("{}_args", func.name.name),
            name: generated("args"),
            kind: StructKind::Struct,
            fields: params.clone(),
            doc: None,
            hashable: false,
            union_default: None,
        };
        let mut method = MethodDef {
            thrift_name: func.name.name.clone(),
            name: rust_name,
            variant,
            doc: func.doc.clone(),
            owner: self.path(file, &svc.name.name),
            args: local(args.name.clone()),
            params,
            result: None,
            returns: None,
            oneway: func.oneway,
            exception: None,
            throws: Vec::new(),
        };
        if func.oneway {
            if !func.throws.is_empty() {
                return Err(self.err(
                    file,
                    func.span,
                    format!("oneway method `{}` cannot throw exceptions", func.name.name),
                ));
            }
            if func.returns.is_some() {
                // Apache Thrift warns and drops it: no reply ever carries it.
                self.warn(
                    file,
                    func.span,
                    format!(
                        "oneway method `{}` returns nothing: its return type is dropped, as \
                         Apache Thrift does",
                        func.name.name
                    ),
                );
            }
            return Ok((method, args, None));
        }
        let mut fields = Vec::new();
        if let Some(ret) = &func.returns {
            let ty = self.ty(file, ret, 0)?;
            method.returns = Some(ty.clone());
            fields.push(FieldDef {
                id: 0,
                thrift_name: "success".into(),
                name: "success".into(),
                ty,
                req: Requiredness::Optional,
                default: None,
                boxed: false,
            });
        }
        let mut variants: HashMap<String, String> = HashMap::new();
        for mut f in self.field_list(file, &func.throws, false)? {
            let exception = match &f.ty {
                Ty::Struct(p)
                    if self
                        .find_struct(p)
                        .is_some_and(|(_, s)| s.kind == ast::StructKind::Exception) =>
                {
                    p.clone()
                }
                _ => {
                    return Err(self.err(
                        file,
                        func.span,
                        format!(
                            "`{}` in the throws of `{}` is not an exception",
                            f.thrift_name, func.name.name
                        ),
                    ));
                }
            };
            if f.id == 0 || f.name == "success" {
                return Err(self.err(
                    file,
                    func.span,
                    format!(
                        "exception `{}` of `{}` clashes with the result's `success` field",
                        f.thrift_name, func.name.name
                    ),
                ));
            }
            let mut variant = names::upper_camel(&f.thrift_name);
            if let Some(first) = variants.get(&variant) {
                let fresh = (2..)
                    .map(|n| format!("{variant}{n}"))
                    .find(|v| !variants.contains_key(v))
                    .unwrap_or_default();
                self.warn(
                    file,
                    func.span,
                    format!(
                        "exceptions `{first}` and `{}` of `{}` are both `{variant}` in Rust; \
                         `{}` is `{fresh}`",
                        f.thrift_name, func.name.name, f.thrift_name
                    ),
                );
                variant = fresh;
            }
            variants.insert(variant.clone(), f.thrift_name.clone());
            method.throws.push(ThrowDef {
                variant,
                field: f.name.clone(),
                ty: exception,
            });
            f.req = Requiredness::Optional;
            fields.push(f);
        }
        if !method.throws.is_empty() {
            method.exception = Some(local(generated("exception")));
        }
        let result = StructDef {
            thrift_name: format!("{}_result", func.name.name),
            name: generated("result"),
            kind: StructKind::Struct,
            fields,
            doc: None,
            hashable: false,
            union_default: None,
        };
        method.result = Some(local(result.name.clone()));
        Ok((method, args, Some(result)))
    }
}
