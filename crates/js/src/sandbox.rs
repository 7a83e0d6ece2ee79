//! The JavaScript sandbox: one QuickJS runtime per thread that runs scripts, reused by
//! every query on that thread, so a query pays for compiling its functions once per
//! thread, not once per document.
//!
//! A runtime has a memory cap and an interrupt handler that stops a call at its deadline
//! (the command's `maxTimeMS` or [`JS_TIME_LIMIT_MS`], whichever comes first); a stopped
//! or exhausted runtime is thrown away, so the next call starts clean. The global object
//! holds only ECMAScript's built-ins and MongoDB's shell types: no I/O, no `require`, no
//! host functions. What a script needs from outside (its `scope`, `system.js` functions)
//! is passed in as arguments of the function that wraps it.

use crate::bson_conversion::{engine_error, Internal, ShellTypes};
use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};
use rquickjs::context::EvalOptions;
use rquickjs::convert::Coerced;
use rquickjs::function::Args;
use rquickjs::{Array, Context, Ctx, FromJs, Function, Persistent, Runtime, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one call into JavaScript may run when the command sets no `maxTimeMS`.
pub const JS_TIME_LIMIT_MS: u64 = 10_000;
/// The memory one thread's runtime may hold.
pub const JS_MEMORY_LIMIT_BYTES: usize = 64 << 20;
/// Deep enough for ordinary recursion, well within a worker thread's stack.
const JS_STACK_SIZE_BYTES: usize = 512 << 10;
/// Compiled functions kept per thread; past this the cache starts over.
const COMPILED_SCRIPTS_MAX: usize = 256;

static SCRIPTING_ENABLED: AtomicBool = AtomicBool::new(true);

thread_local! {
    /// The `maxTimeMS` deadline of the command this thread is running.
    static COMMAND_DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Counts the commands this thread has run: a sandbox serves one command only.
    static COMMAND_NUMBER: Cell<u64> = const { Cell::new(0) };
}

/// Runs a command's `body` with its `maxTimeMS` as the deadline of every script it calls,
/// in a sandbox of its own: what one client's script leaves behind (a global, a changed
/// prototype) is never seen by another's. Scripts run on the command's thread, which is
/// why thread-locals carry this; work handed to other threads must set it there too.
pub fn with_command_deadline<R>(max_time_ms: Option<i64>, body: impl FnOnce() -> R) -> R {
    let deadline = max_time_ms
        .filter(|ms| *ms > 0)
        .map(|ms| Instant::now() + Duration::from_millis(ms as u64));
    COMMAND_NUMBER.set(COMMAND_NUMBER.get() + 1);
    let outer = COMMAND_DEADLINE.replace(deadline);
    let result = body();
    COMMAND_DEADLINE.set(outer);
    result
}
static NEXT_SCRIPT_ID: AtomicU64 = AtomicU64::new(1);

/// Turns server-side JavaScript on or off for the whole process (mongod's
/// `--noscripting`).
pub fn set_scripting_enabled(enabled: bool) {
    SCRIPTING_ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether server-side JavaScript is on.
pub fn scripting_enabled() -> bool {
    SCRIPTING_ENABLED.load(Ordering::Relaxed)
}

/// Fails with mongod's error for `mapReduce`, `$function` and `$accumulator` when
/// scripting is off (`$where` has its own, see `where_clause.rs`).
pub fn check_scripting_enabled() -> Result<()> {
    if scripting_enabled() {
        Ok(())
    } else {
        Err(Error::location(
            31264,
            "Cannot run server-side javascript without the javascript engine enabled",
        ))
    }
}

/// A JavaScript function ready to be called on any thread: its source wrapped so that its
/// scope arrives as arguments, and an id under which each thread keeps it compiled.
#[derive(Clone, Debug)]
pub struct Script {
    inner: Arc<ScriptSource>,
}

#[derive(Debug)]
struct ScriptSource {
    id: u64,
    /// Wrappers to try in turn: a string that is not a function is first taken as an
    /// expression (`this.a > 1`), then as a function body (`var x = 1; return x`).
    wrappers: Vec<String>,
    scope: Vec<Bson>,
    /// The only fields of its document the script can read, when it reads them by name
    /// (`this.a`, `obj.b`): only those are converted to JS, which matters for wide
    /// documents. `None`: it may read any.
    fields: Option<Vec<String>>,
}

impl Script {
    /// A function (`function (k, v) {...}`), or a string taken as the body of one, whose
    /// free variables may name the fields of `scope`. Syntax errors are reported here.
    pub fn new(code: &str, scope: &Document) -> Result<Script> {
        let names: Vec<&str> = scope
            .keys()
            .map(String::as_str)
            .filter(|name| is_identifier(name))
            .collect();
        let values = names
            .iter()
            .map(|name| scope.get(*name).cloned().unwrap_or(Bson::Null));
        let parameters = names.join(", ");
        let bodies = if is_function_source(code) {
            vec![format!("({code}\n)")]
        } else {
            vec![
                format!("(function () {{ return ({code}\n); }})"),
                format!("(function () {{ {code}\n }})"),
            ]
        };
        // `obj` is the document a `$where` is called on, as in mongod.
        let wrappers = bodies
            .into_iter()
            .map(|body| {
                format!(
                    "(function (emit{}{parameters}) {{ var obj; var fn = {body}; \
                     return function (doc, args) {{ obj = doc; return fn.apply(doc, args); }}; }})",
                    if names.is_empty() { "" } else { ", " }
                )
            })
            .collect();
        let script = Script {
            inner: Arc::new(ScriptSource {
                id: NEXT_SCRIPT_ID.fetch_add(1, Ordering::Relaxed),
                wrappers,
                scope: values.collect(),
                fields: fields_read(code),
            }),
        };
        with_session(|session| session.compile(&script).map(|_| ()))?;
        Ok(script)
    }

    /// Calls the function once with `this` bound to `this` and BSON arguments.
    pub fn call(&self, this: Option<&Document>, args: &[Bson]) -> Result<Bson> {
        with_session(|session| {
            let compiled = session.compile(self)?;
            let this = match this {
                Some(doc) => self.document_to_js(session, doc)?.into_value(),
                None => Value::new_undefined(session.ctx.clone()),
            };
            let args = args
                .iter()
                .map(|arg| session.shell.to_js(arg))
                .collect::<Result<Vec<_>>>()?;
            let result = session.call(&compiled, this, args)?;
            session.shell.to_bson(result)
        })
    }
}

impl Script {
    /// The document a script is called on, as its `this`.
    pub(crate) fn document_to_js<'js>(
        &self,
        session: &Session<'_, 'js>,
        doc: &Document,
    ) -> Result<rquickjs::Object<'js>> {
        session
            .shell
            .document_to_js(doc, self.inner.fields.as_deref())
    }
}

/// The top-level fields `code` reads from its document, if every mention of `this` and
/// `obj` is followed by `.name`; `None` if it may see the whole document (`this[k]`,
/// `f(this)`, `for (k in obj)`). Strings and comments are not skipped, so a mention
/// there only makes the answer more cautious.
fn fields_read(code: &str) -> Option<Vec<String>> {
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
    let mut fields: Vec<String> = Vec::new();
    let mut k = 0;
    while k < bytes.len() {
        if !is_ident(bytes[k]) {
            k += 1;
            continue;
        }
        let start = k;
        while k < bytes.len() && is_ident(bytes[k]) {
            k += 1;
        }
        let word = &code[start..k];
        let after_dot = code[..start].trim_end().ends_with('.');
        if !(word == "this" || word == "obj") || after_dot {
            continue;
        }
        let rest = code[k..].trim_start();
        let name_start = rest.strip_prefix('.')?.trim_start();
        let name_len = name_start.bytes().take_while(|b| is_ident(*b)).count();
        if name_len == 0 {
            return None;
        }
        let name = &name_start[..name_len];
        if !fields.iter().any(|f| f == name) {
            fields.push(name.to_string());
        }
    }
    Some(fields)
}

/// A compiled script in one session: the function and the collector of its emits.
pub(crate) struct Compiled<'js> {
    function: Function<'js>,
    pub(crate) drain_emits: Function<'js>,
}

struct CompiledSaved {
    function: Persistent<Function<'static>>,
    drain_emits: Persistent<Function<'static>>,
}

/// One thread's runtime. Fields drop in order: values held for the runtime go before it.
struct Sandbox {
    compiled: HashMap<u64, CompiledSaved>,
    internals: Persistent<Array<'static>>,
    context: Context,
    _runtime: Runtime,
    deadline: Rc<Cell<Instant>>,
    /// The command (see [`with_command_deadline`]) this sandbox serves.
    command: u64,
}

thread_local! {
    static SANDBOX: RefCell<Option<Sandbox>> = const { RefCell::new(None) };
}

impl Sandbox {
    fn new() -> Result<Sandbox> {
        let runtime = Runtime::new().map_err(engine_error)?;
        runtime.set_memory_limit(JS_MEMORY_LIMIT_BYTES);
        runtime.set_max_stack_size(JS_STACK_SIZE_BYTES);
        let deadline = Rc::new(Cell::new(
            Instant::now() + Duration::from_millis(JS_TIME_LIMIT_MS),
        ));
        let watched = deadline.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || Instant::now() >= watched.get())));
        let context = Context::full(&runtime).map_err(engine_error)?;
        let internals = context
            .with(|ctx| {
                let internals: Array = ctx.eval(include_str!("shell_types.js"))?;
                Ok(Persistent::save(&ctx, internals))
            })
            .map_err(engine_error)?;
        Ok(Sandbox {
            compiled: HashMap::new(),
            internals,
            context,
            _runtime: runtime,
            deadline,
            command: COMMAND_NUMBER.get(),
        })
    }
}

/// Runs `body` in this thread's sandbox, creating it on first use and discarding it after
/// a call was stopped (time, memory), so no half-finished state survives.
pub(crate) fn with_session<R>(
    body: impl for<'js> FnOnce(&mut Session<'_, 'js>) -> Result<R>,
) -> Result<R> {
    SANDBOX.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            Error::new(
                ErrorCode::JS_INTERPRETER_FAILURE,
                "JavaScript cannot be called from JavaScript",
            )
        })?;
        if slot
            .as_ref()
            .is_none_or(|sandbox| sandbox.command != COMMAND_NUMBER.get())
        {
            *slot = None;
            *slot = Some(Sandbox::new()?);
        }
        let poisoned = Cell::new(false);
        let deadline = COMMAND_DEADLINE.get();
        let result = {
            let Some(sandbox) = slot.as_mut() else {
                unreachable!("the sandbox was just created")
            };
            let Sandbox {
                compiled,
                internals,
                context,
                deadline: interrupt_at,
                ..
            } = sandbox;
            context.with(|ctx| {
                let internals = internals.clone().restore(&ctx).map_err(engine_error)?;
                let shell = ShellTypes::new(&ctx, internals);
                let mut session = Session {
                    ctx,
                    shell,
                    compiled,
                    interrupt_at,
                    deadline,
                    poisoned: &poisoned,
                };
                body(&mut session)
            })
        };
        if poisoned.get() {
            *slot = None;
        }
        result
    })
}

/// Calls into one thread's sandbox, within one borrow of it.
pub(crate) struct Session<'a, 'js> {
    pub(crate) ctx: Ctx<'js>,
    pub(crate) shell: ShellTypes<'js>,
    compiled: &'a mut HashMap<u64, CompiledSaved>,
    interrupt_at: &'a Cell<Instant>,
    /// The command's `maxTimeMS` deadline.
    deadline: Option<Instant>,
    poisoned: &'a Cell<bool>,
}

impl<'js> Session<'_, 'js> {
    /// The script compiled in this sandbox, compiling it on first use.
    pub(crate) fn compile(&mut self, script: &Script) -> Result<Compiled<'js>> {
        let source = &script.inner;
        if let Some(saved) = self.compiled.get(&source.id) {
            let restore = |f: &Persistent<Function<'static>>| f.clone().restore(&self.ctx);
            return Ok(Compiled {
                function: restore(&saved.function).map_err(engine_error)?,
                drain_emits: restore(&saved.drain_emits).map_err(engine_error)?,
            });
        }
        self.arm();
        let mut factory = None;
        let mut last_error = None;
        for wrapper in &source.wrappers {
            match eval_sloppy::<Function>(&self.ctx, wrapper.clone()) {
                Ok(f) => {
                    factory = Some(f);
                    break;
                }
                Err(e) => last_error = Some(self.failure(e)),
            }
        }
        let Some(factory) = factory else {
            return Err(last_error.unwrap_or_else(|| js_failure("empty script")));
        };
        let make_emit: Function = self
            .shell
            .internal(Internal::MakeEmit)
            .map_err(engine_error)?;
        let pair: Array = make_emit.call(()).map_err(|e| self.failure(e))?;
        let emit: Function = pair.get(0).map_err(engine_error)?;
        let drain_emits: Function = pair.get(1).map_err(engine_error)?;
        let mut args = Args::new(self.ctx.clone(), 1 + source.scope.len());
        args.push_arg(emit).map_err(engine_error)?;
        for value in &source.scope {
            args.push_arg(self.shell.to_js(value)?)
                .map_err(engine_error)?;
        }
        let function: Value = factory.call_arg(args).map_err(|e| self.failure(e))?;
        let Some(function) = function.into_function() else {
            return Err(js_failure("the script is not a function"));
        };
        if self.compiled.len() >= COMPILED_SCRIPTS_MAX {
            self.compiled.clear();
        }
        self.compiled.insert(
            source.id,
            CompiledSaved {
                function: Persistent::save(&self.ctx, function.clone()),
                drain_emits: Persistent::save(&self.ctx, drain_emits.clone()),
            },
        );
        Ok(Compiled {
            function,
            drain_emits,
        })
    }

    /// Calls a compiled script with `this` and arguments, under the time limit.
    pub(crate) fn call(
        &self,
        compiled: &Compiled<'js>,
        this: Value<'js>,
        args: Vec<Value<'js>>,
    ) -> Result<Value<'js>> {
        self.arm();
        // `$where` passes no arguments: it then costs no array per document.
        if args.is_empty() {
            return compiled.function.call((this,)).map_err(|e| self.failure(e));
        }
        let list = Array::new(self.ctx.clone()).map_err(engine_error)?;
        for (k, arg) in args.into_iter().enumerate() {
            list.set(k, arg).map_err(engine_error)?;
        }
        compiled
            .function
            .call((this, list))
            .map_err(|e| self.failure(e))
    }

    /// Starts the clock of one call.
    fn arm(&self) {
        let limit = Instant::now() + Duration::from_millis(JS_TIME_LIMIT_MS);
        self.interrupt_at
            .set(self.deadline.map_or(limit, |deadline| deadline.min(limit)));
    }

    /// The MongoDB error for a failed call: the script's exception with its message, or
    /// the time or memory limit that stopped it.
    pub(crate) fn failure(&self, error: rquickjs::Error) -> Error {
        if !matches!(error, rquickjs::Error::Exception) {
            if matches!(error, rquickjs::Error::Allocation) {
                self.poisoned.set(true);
                return js_failure("Out of memory");
            }
            return engine_error(error);
        }
        let thrown = self.ctx.catch();
        let now = Instant::now();
        if now >= self.interrupt_at.get() {
            self.poisoned.set(true);
            if self.deadline.is_some_and(|deadline| now >= deadline) {
                return Error::new(
                    ErrorCode::MAX_TIME_MS_EXPIRED,
                    "operation exceeded time limit",
                );
            }
            return js_failure(format!(
                "JavaScript execution interrupted: exceeded the time limit of {JS_TIME_LIMIT_MS} ms"
            ));
        }
        // QuickJS out of memory cannot allocate the error it would throw: it throws null.
        if thrown.is_null() {
            self.poisoned.set(true);
            return js_failure("Out of memory (or the script threw null)");
        }
        let message = describe(thrown);
        if message.contains("out of memory") {
            self.poisoned.set(true);
            return js_failure(format!("Out of memory: {message}"));
        }
        js_failure(message)
    }
}

/// Evaluates user code as mongod does: in sloppy mode, where `x = 1` in a map function
/// makes a variable rather than an error (rquickjs evaluates strict code by default).
pub(crate) fn eval_sloppy<'js, T: FromJs<'js>>(
    ctx: &Ctx<'js>,
    source: String,
) -> rquickjs::Result<T> {
    let mut options = EvalOptions::default();
    options.strict = false;
    ctx.eval_with_options(source, options)
}

/// What a thrown value says: `Error: message` for errors, the value as text otherwise.
fn describe(thrown: Value<'_>) -> String {
    let stack: Option<String> = thrown
        .as_object()
        .and_then(|object| object.get::<_, Option<String>>("stack").ok().flatten());
    let text = thrown
        .get::<Coerced<String>>()
        .map(|c| c.0)
        .unwrap_or_else(|_| "unknown JavaScript exception".to_string());
    match stack {
        Some(stack) if !stack.trim().is_empty() => format!("{text} :\n{}", stack.trim_end()),
        _ => text,
    }
}

pub(crate) fn js_failure(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::JS_INTERPRETER_FAILURE, message)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && !matches!(name, "emit" | "obj" | "fn")
}

/// Whether `code` is a function expression rather than an expression or body to wrap.
fn is_function_source(code: &str) -> bool {
    let code = code.trim_start();
    if code.starts_with("function") || code.starts_with("async function") {
        return true;
    }
    // An arrow function: `x => ...` or `(a, b) => ...`.
    code.split_once("=>").is_some_and(|(head, _)| {
        let head = head.trim();
        is_identifier(head)
            || (head.starts_with('(')
                && head.ends_with(')')
                && head[1..head.len() - 1]
                    .split(',')
                    .all(|p| p.trim().is_empty() || is_identifier(p.trim())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(code: &str, args: &[Bson]) -> Result<Bson> {
        Script::new(code, &Document::new())?.call(None, args)
    }

    #[test]
    fn functions_take_bson_arguments_and_return_bson() {
        assert_eq!(
            run(
                "function (a, b) { return a + b; }",
                &[Bson::Int32(1), Bson::Double(2.5)]
            )
            .unwrap(),
            Bson::Double(3.5)
        );
        assert_eq!(
            run("(s) => s.toUpperCase()", &[Bson::String("ab".into())]).unwrap(),
            Bson::String("AB".into())
        );
    }

    #[test]
    fn strings_are_expressions_or_bodies() {
        let this = doc! {"a": 2, "b": 1};
        let expr = Script::new("this.a > this.b", &Document::new()).unwrap();
        assert_eq!(expr.call(Some(&this), &[]).unwrap(), Bson::Boolean(true));
        let body = Script::new("var d = obj.a - obj.b; return d == 1", &Document::new()).unwrap();
        assert_eq!(body.call(Some(&this), &[]).unwrap(), Bson::Boolean(true));
    }

    #[test]
    fn scope_values_are_free_variables() {
        let script = Script::new(
            "function () { return this.x * factor; }",
            &doc! {"factor": 3},
        )
        .unwrap();
        assert_eq!(
            script.call(Some(&doc! {"x": 2}), &[]).unwrap(),
            Bson::Double(6.0)
        );
    }

    #[test]
    fn exceptions_and_syntax_errors_are_js_interpreter_failures() {
        let e = run("function () { throw new Error('boom'); }", &[]).unwrap_err();
        assert_eq!(e.code, ErrorCode::JS_INTERPRETER_FAILURE);
        assert!(e.message.contains("Error: boom"), "{}", e.message);
        let e = Script::new("function ( {", &Document::new()).unwrap_err();
        assert_eq!(e.code, ErrorCode::JS_INTERPRETER_FAILURE);
        assert!(e.message.contains("SyntaxError"), "{}", e.message);
    }

    #[test]
    fn runaway_loops_stop_at_the_deadline_and_the_sandbox_recovers() {
        let script = Script::new("function () { while (true) {} }", &Document::new()).unwrap();
        let e = with_command_deadline(Some(50), || script.call(None, &[])).unwrap_err();
        assert_eq!(e.code, ErrorCode::MAX_TIME_MS_EXPIRED);
        assert_eq!(
            run("function () { return 1; }", &[]).unwrap(),
            Bson::Double(1.0)
        );
    }

    #[test]
    fn memory_bombs_stop_at_the_cap() {
        let e = run(
            "function () { var a = []; while (true) a.push(new Array(1000).fill(1)); }",
            &[],
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::JS_INTERPRETER_FAILURE);
        assert!(e.message.contains("Out of memory"), "{}", e.message);
        assert_eq!(
            run("function () { return 2; }", &[]).unwrap(),
            Bson::Double(2.0)
        );
    }

    #[test]
    fn each_command_gets_a_fresh_sandbox() {
        let leak = "function () { leaked = 1; Array.prototype.evil = 1; return 0; }";
        with_command_deadline(None, || run(leak, &[])).unwrap();
        let look = "function () { return typeof leaked + typeof [].evil; }";
        let seen = with_command_deadline(None, || run(look, &[])).unwrap();
        assert_eq!(seen, Bson::String("undefinedundefined".into()));
    }

    #[test]
    fn scripts_that_name_their_fields_see_only_those() {
        let fields = |code: &str| fields_read(code);
        assert_eq!(
            fields("this.a > obj.b && this.a < 5"),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            fields("function () { emit(this._id, this . v.w); }"),
            Some(vec!["_id".into(), "v".into()])
        );
        assert_eq!(fields("x.this + myobj"), Some(vec![]));
        assert_eq!(fields("this['a']"), None);
        assert_eq!(fields("f(this)"), None);
        assert_eq!(fields("for (var k in obj) {}"), None);
        let script = Script::new("this.a + this.b", &Document::new()).unwrap();
        let wide = doc! {"a": 1, "b": 2, "c": 3};
        assert_eq!(script.call(Some(&wide), &[]).unwrap(), Bson::Double(3.0));
        let whole = Script::new("Object.keys(this).length", &Document::new()).unwrap();
        assert_eq!(whole.call(Some(&wide), &[]).unwrap(), Bson::Double(3.0));
    }

    #[test]
    fn there_is_no_io_or_require() {
        let e = run("function () { return require('fs'); }", &[]).unwrap_err();
        assert!(
            e.message.contains("require is not defined"),
            "{}",
            e.message
        );
        assert_eq!(
            run("function () { return typeof std + typeof os; }", &[]).unwrap(),
            Bson::String("undefinedundefined".into())
        );
    }
}
